import { canonicalJson } from '../../common/canonical-json';
import { AppError } from '../../common/errors';
import { decodePayload } from '../../common/event-kinds';
import { decodeAgentConfig, hex, type AgentConfig } from './agent-config';
import type { ReplayEntry } from './journal-turns';
import { turnAgentOf } from './replay-inputs';
import { ReservedTool } from './reserved-tools';
import { modelCallFromProto } from './step-codec';
import type { TurnAgent } from './turn-agents';
import type { RecordedBlock } from './turn-records';

/**
 * What-if's changes of an agent target (docs/replay.md, "What-if"): the agent a recorded
 * `__handoff_to` or `__delegate_to` call names, rewritten in the model output that asked
 * for it, so the machine decides the handoff or the delegation again. Pure.
 */

/** A change of the agent one `__handoff_to` or `__delegate_to` call names. */
export interface TargetChange {
  readonly kind: 'handoff' | 'delegate';
  readonly toolCallId: string;
  readonly agent: string;
}

/** The reserved tool whose calls a change of `kind` rewrites. */
export function targetTool(kind: TargetChange['kind']): ReservedTool {
  return kind === 'handoff' ? ReservedTool.HandoffTo : ReservedTool.DelegateTo;
}

/**
 * `content` with the call `change.toolCallId` of the change's tool naming `change.agent`
 * (its other arguments kept); `content` itself when it holds no such call.
 */
export function retargeted(
  content: readonly RecordedBlock[],
  change: TargetChange,
): readonly RecordedBlock[] {
  const tool = targetTool(change.kind);
  const at = content.findIndex(
    (b) => b.type === 'tool_use' && b.toolCallId === change.toolCallId && b.name === tool,
  );
  const block = content[at];
  if (block?.type !== 'tool_use') return content;
  const args = JSON.parse(block.argsJson) as Record<string, unknown>;
  const argsJson = canonicalJson({ ...args, agent: change.agent });
  return content.map((b, i) => (i === at ? { ...block, argsJson } : b));
}

/** The newest recorded configuration of each named agent: whom a changed target may reach. */
export function recordedAgents(entries: readonly ReplayEntry[]): TurnAgent[] {
  const newest = new Map<string, TurnAgent>();
  for (const config of configsOf(entries).values()) {
    if (config.agent !== undefined) newest.set(config.agent, turnAgentOf(config));
  }
  return [...newest.values()];
}

/**
 * Refuses a changed delegation whose target the asking agent could never reach, before
 * anything is replayed: an agent with no configuration in the journal (replay could not
 * run it), or one the asking agent's recorded configuration does not list in `delegates`
 * (the machine would only refuse the call, which is no question for a what-if). Allowed
 * targets the machine may still refuse (a cycle, too deep) show in the report. A call the
 * journal does not hold is left to the caller's not-found error.
 *
 * @throws AppError `invalid_argument` naming the agents the call may be moved to
 */
export function checkDelegateTarget(entries: readonly ReplayEntry[], change: TargetChange): void {
  const configs = configsOf(entries);
  for (const entry of entries) {
    if (entry.kind !== 'model_call') continue;
    const call = modelCallFromProto(decodePayload('model_call', entry.payload));
    const asks = call.content.some(
      (b) =>
        b.type === 'tool_use' &&
        b.toolCallId === change.toolCallId &&
        b.name === ReservedTool.DelegateTo,
    );
    if (!asks) continue;
    const asker = call.configSha256 === undefined ? undefined : configs.get(hex(call.configSha256));
    const name = asker?.agent ?? call.agent ?? '';
    const allowed = asker?.delegates ?? [];
    const known = new Set(recordedAgents(entries).map((agent) => agent.name));
    const reachable = allowed.filter((agent) => known.has(agent));
    const pick =
      reachable.length === 0
        ? 'none of its delegates has a recorded configuration'
        : `pick one of ${reachable.join(', ')}`;
    if (!allowed.includes(change.agent)) {
      const may =
        allowed.length === 0
          ? 'may delegate to no agent'
          : `may delegate only to ${allowed.join(', ')}`;
      throw new AppError(
        'invalid_argument',
        `delegate@${change.toolCallId}=${change.agent}: agent ${name || '(unnamed)'} ${may} (its recorded configuration), so the call could only be refused; ${pick}`,
      );
    }
    if (!known.has(change.agent)) {
      throw new AppError(
        'invalid_argument',
        `delegate@${change.toolCallId}=${change.agent}: the journal records no configuration of agent ${change.agent} (it never ran in this conversation), so replay cannot run it; ${pick}`,
      );
    }
    return;
  }
}

/** Every recorded configuration, by its digest (hex). */
function configsOf(entries: readonly ReplayEntry[]): Map<string, AgentConfig> {
  const configs = new Map<string, AgentConfig>();
  for (const entry of entries) {
    if (entry.kind !== 'agent_config') continue;
    const payload = decodePayload('agent_config', entry.payload);
    configs.set(hex(payload.sha256), decodeAgentConfig(payload.configJson).config);
  }
  return configs;
}
