/**
 * What the control plane reads of a committed agent configuration (docs/replay.md): whose
 * it is and which tools it offers, for the journal view and plan-agent-tools.ts. Pure.
 */
import type { AgentConfigRef } from './journal-view-types';

/**
 * The agent an `agent_config` configures and the names of the tools it offers
 * (docs/replay.md, "Agent configuration bytes"). The control plane checked the JSON before
 * it was committed (recording-check.ts); a configuration it cannot read offers nothing.
 */
export function configToolsOf(configJson: string): Pick<AgentConfigRef, 'agent' | 'toolNames'> {
  let value: unknown;
  try {
    value = JSON.parse(configJson);
  } catch {
    return { agent: '', toolNames: [] };
  }
  const { agent, tools } = (typeof value === 'object' && value !== null ? value : {}) as {
    agent?: unknown;
    tools?: unknown;
  };
  const toolNames = Array.isArray(tools)
    ? tools.flatMap((tool: { name?: unknown } | null) =>
        typeof tool?.name === 'string' ? [tool.name] : [],
      )
    : [];
  return { agent: typeof agent === 'string' ? agent : '', toolNames };
}
