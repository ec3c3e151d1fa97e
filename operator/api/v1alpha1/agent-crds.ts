/**
 * The Agent and ModelConfig CustomResourceDefinitions; `hack/gen-crds.ts` writes them to
 * config/crd/bases beside the Conversation's.
 */
import { agentResourceSpecField, AgentResource, agentRootRules } from './agent-resource';
import { ModelConfigResource, modelConfigSpecField } from './model-config-resource';
import { readyStatusField } from './ready-status';
import type { ResourceDefinition } from './resource-crd';
import { AGE_COLUMN, customResourceDefinition, objectSchema, READY_COLUMN } from './resource-crd';

/** `kubectl get modelconfigs`: NAME, PROVIDER, MODEL, READY, AGE. */
const modelConfigDefinition: ResourceDefinition = {
  names: ModelConfigResource,
  description:
    'A model an Agent calls: provider, model id, endpoint and the Secret key that holds its API key.',
  spec: modelConfigSpecField.schema,
  status: readyStatusField.schema,
  printerColumns: [
    { name: 'Provider', type: 'string', jsonPath: '.spec.provider', description: 'Model API.' },
    { name: 'Model', type: 'string', jsonPath: '.spec.model', description: 'Model id.' },
    READY_COLUMN,
    AGE_COLUMN,
  ],
};

/** `kubectl get agents`: NAME, MODEL, READY, AGE. */
const agentDefinition: ResourceDefinition = {
  names: AgentResource,
  description:
    'An agent: its model, system prompt, tools, step budget and approval rules, and the Agents it may hand off or delegate to.',
  spec: agentResourceSpecField.schema,
  status: readyStatusField.schema,
  printerColumns: [
    {
      name: 'Model',
      type: 'string',
      jsonPath: '.spec.modelRef.name',
      description: 'The ModelConfig the agent calls.',
    },
    READY_COLUMN,
    AGE_COLUMN,
  ],
  rootRules: agentRootRules,
};

/** The ModelConfig object schema. */
export const modelConfigSchema = objectSchema(modelConfigDefinition);
/** The Agent object schema. */
export const agentSchema = objectSchema(agentDefinition);
/** The ModelConfig CRD. */
export const modelConfigCrd = customResourceDefinition(modelConfigDefinition);
/** The Agent CRD. */
export const agentCrd = customResourceDefinition(agentDefinition);
