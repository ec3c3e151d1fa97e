/**
 * Narrowing of Agents and ModelConfigs read from the watches (raw JSON) with the CRDs'
 * own schemas: an object that does not pass is not reconciled. Pure.
 */
import type { Agent } from '../api/v1alpha1/agent-resource';
import { AgentResource } from '../api/v1alpha1/agent-resource';
import { agentSchema, modelConfigSchema } from '../api/v1alpha1/agent-crds';
import type { ModelConfig } from '../api/v1alpha1/model-config-resource';
import { ModelConfigResource } from '../api/v1alpha1/model-config-resource';
import type { JsonSchema } from '../api/v1alpha1/schema-builder';
import { checkAgainstSchema, isPlainObject } from '../api/v1alpha1/schema-check';

function isObjectOf(value: unknown, apiVersion: string, kind: string, schema: JsonSchema): boolean {
  if (!isPlainObject(value) || value['apiVersion'] !== apiVersion || value['kind'] !== kind) {
    return false;
  }
  const metadata = value['metadata'];
  if (
    !isPlainObject(metadata) ||
    typeof metadata['name'] !== 'string' ||
    typeof metadata['namespace'] !== 'string'
  ) {
    return false;
  }
  return checkAgainstSchema(schema, value, '').length === 0;
}

/** An Agent that matches the CRD's schema. */
export function isAgent(value: unknown): value is Agent {
  return isObjectOf(value, AgentResource.apiVersion, AgentResource.kind, agentSchema);
}

/** A ModelConfig that matches the CRD's schema. */
export function isModelConfig(value: unknown): value is ModelConfig {
  return isObjectOf(
    value,
    ModelConfigResource.apiVersion,
    ModelConfigResource.kind,
    modelConfigSchema,
  );
}

/** The Agents and ModelConfigs of one namespace, as the control plane's watches hold them. */
export interface AgentDirectory {
  agent(name: string): Agent | undefined;
  modelConfig(name: string): ModelConfig | undefined;
}
