/**
 * An Agent's Ready condition, from what the control plane's caches hold of the ModelConfig
 * and the Agents it names (docs/operator.md, "Agents and ModelConfigs"). Pure.
 */
import { ConditionStatus } from '../api/v1alpha1/conditions';
import type { Condition } from '../api/v1alpha1/conversation-status';
import type { AgentResourceSpec } from '../api/v1alpha1/agent-resource';
import { AgentReason } from '../api/v1alpha1/resource-conditions';
import type { ReadyVerdict } from './ready-condition';

/** What {@link agentReady} decides from. */
export interface AgentReadyInput {
  readonly spec: AgentResourceSpec;
  /** The ModelConfig's Ready condition; `undefined` ModelConfig: it does not exist. */
  readonly modelConfig: { readonly ready: Condition | undefined } | undefined;
  /** Whether an Agent of that name exists in the same namespace. */
  readonly agentExists: (name: string) => boolean;
}

/** Every Agent `spec` names (handoffs, then delegates), once each, in order. */
export function agentTargets(spec: AgentResourceSpec): string[] {
  return [...new Set([...(spec.handoffs ?? []), ...(spec.delegates ?? [])])];
}

/**
 * Ready True `Resolved` when the ModelConfig is Ready and every target exists; otherwise
 * False with the first problem as its reason (ModelConfig missing, ModelConfig not Ready,
 * targets missing) and every problem in the message.
 */
export function agentReady(input: AgentReadyInput): ReadyVerdict {
  const model = input.spec.modelRef.name;
  const problems: { reason: string; message: string }[] = [];
  if (input.modelConfig === undefined) {
    problems.push({
      reason: AgentReason.ModelConfigNotFound,
      message: `ModelConfig ${model} does not exist in this namespace: create it or fix spec.modelRef.name`,
    });
  } else if (input.modelConfig.ready?.status !== ConditionStatus.True) {
    const why = input.modelConfig.ready?.reason ?? 'not reconciled yet';
    problems.push({
      reason: AgentReason.ModelConfigNotReady,
      message: `ModelConfig ${model} is not Ready (${why}): see kubectl describe modelconfig ${model}`,
    });
  }
  const handoffs = new Set(input.spec.handoffs ?? []);
  const missing = agentTargets(input.spec).filter((name) => !input.agentExists(name));
  if (missing.length > 0) {
    const listed = missing
      .map((name) => `${name} (${handoffs.has(name) ? 'handoffs' : 'delegates'})`)
      .join(', ');
    problems.push({
      reason: AgentReason.TargetNotFound,
      message: `no Agent ${listed} in this namespace: create ${missing.length === 1 ? 'it' : 'them'} or remove ${missing.length === 1 ? 'it' : 'them'} from the list`,
    });
  }
  const first = problems[0];
  if (first === undefined) {
    return {
      status: ConditionStatus.True,
      reason: AgentReason.Resolved,
      message: `ModelConfig ${model} is Ready and every handoff and delegate exists`,
    };
  }
  return {
    status: ConditionStatus.False,
    reason: first.reason,
    message: problems.map((p) => p.message).join('; '),
  };
}
