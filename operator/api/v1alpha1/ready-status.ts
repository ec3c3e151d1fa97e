/**
 * `status` of the kinds whose state is one Ready condition (Agent, ModelConfig), declared
 * with the schema builder and the Conversation's condition shape (metav1.Condition).
 */
import { conditionField } from './conversation-status';
import type { Infer } from './schema-builder';
import { integer, list, object } from './schema-builder';

/** `status`: the generation last reconciled and the Ready condition. */
export const readyStatusField = object(
  {
    observedGeneration: integer({
      description: 'metadata.generation of the last reconcile.',
      format: 'int64',
      minimum: 0,
    }),
    conditions: list(conditionField, {
      description: 'Ready: whether everything this object names resolves; its reason says why not.',
      maxItems: 8,
      listType: 'map',
      listMapKeys: ['type'],
    }),
  },
  { description: 'Observed state, written by the control plane.' },
);

/** The status of an Agent or a ModelConfig. */
export type ReadyStatus = Infer<typeof readyStatusField>;
