import { MEMORY_LIMITS, MEMORY_TOOL } from '../../common/memory';
import type { TurnTool } from '../turn/turn-records';

/**
 * The built-in `memory` tool (docs/turns.md, "Memory"): the agent keeps a fact for later
 * turns, or deletes one. It runs on the control plane (the trusted-tool proxy): the
 * harness writes nothing itself; the control plane checks the call against the committed
 * `tool_call`, commits a `memory_set` or `memory_cleared`, and answers. It is `pure` for the
 * loop's crash rules: running it again is safe, because the control plane answers a call
 * whose event it already committed without committing another.
 */
export const memoryTool: TurnTool = {
  name: MEMORY_TOOL,
  description: `Keep a fact about this conversation for later turns, or delete one. Kept facts are shown to you at the start of every later turn. action "set" keeps value under key, replacing an earlier value; action "delete" removes key. Keys: at most ${MEMORY_LIMITS.maxKeyBytes} bytes; values: at most ${MEMORY_LIMITS.maxValueBytes} bytes; at most ${MEMORY_LIMITS.maxKeys} keys.`,
  inputSchema: {
    type: 'object',
    properties: {
      action: { type: 'string', enum: ['set', 'delete'] },
      key: { type: 'string', description: 'A short name, for example "user_city".' },
      value: { type: 'string', description: 'What to keep (for "set").' },
    },
    required: ['action', 'key'],
    additionalProperties: false,
  },
  effect: 'pure',
  needsApproval: false,
  host: 'control_plane',
};
