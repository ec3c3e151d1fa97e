import type { TurnTool } from './turn-records';

/**
 * Tools the turn loop handles itself instead of running. The control plane offers them
 * (in `TurnInput.tools`) only where they apply; the model calling one that was not offered
 * gets an unknown-tool error like any other.
 */
export const ReservedTool = {
  /**
   * `{ agent: string, reason?: string }`: moves the turn to another agent, which continues
   * it (docs/turns.md, "Handoffs"); ends it where handoffs do not continue.
   */
  HandoffTo: '__handoff_to',
  /** `{ question: string }`: pauses with a question; the answer becomes the call's result. */
  AskUser: '__ask_user',
  /**
   * `{ agent: string, task: string }`: asks another agent to do a task on a thread of its
   * own; its answer becomes the call's result (docs/turns.md, "Delegation").
   */
  DelegateTo: '__delegate_to',
} as const;
export type ReservedTool = (typeof ReservedTool)[keyof typeof ReservedTool];

/** True when `name` is a reserved tool's. */
export function isReservedTool(name: string): name is ReservedTool {
  return (
    name === ReservedTool.HandoffTo ||
    name === ReservedTool.AskUser ||
    name === ReservedTool.DelegateTo
  );
}

/** The definition to offer for `__handoff_to`. */
export const handoffTool: TurnTool = {
  name: ReservedTool.HandoffTo,
  description:
    'Hand this conversation to another agent that is better placed to answer. The current turn ends; the target agent continues it.',
  inputSchema: {
    type: 'object',
    properties: {
      agent: { type: 'string', description: 'Name of the agent to hand off to.' },
      reason: { type: 'string', description: 'Why the other agent should take over.' },
    },
    required: ['agent'],
    additionalProperties: false,
  },
  effect: 'pure',
  needsApproval: false,
};

/** An agent another may hand the turn to, as its model is told about it. */
export interface HandoffTarget {
  readonly name: string;
  /** What the agent does (an Agent's `spec.description`); may be empty. */
  readonly description: string;
}

/**
 * `__handoff_to` for an agent that may hand off to `targets`: the schema names exactly
 * those agents, and the description says what each does, so the model picks among them.
 * The machine decides the call by the same list (turn-agents.ts), so a name outside it is
 * refused with a reason whatever the schema says.
 */
export function handoffToolFor(targets: readonly HandoffTarget[]): TurnTool {
  return {
    ...handoffTool,
    ...overAgents(
      targets,
      'Hand this conversation to another agent that is better placed to answer. It continues this turn with everything said so far, and answers later turns until it hands off in turn. The agents you may hand off to:',
      'Name of the agent to hand off to.',
      { name: 'reason', description: 'Why the other agent should take over.', required: false },
    ),
  };
}

/**
 * A reserved tool's description and schema over the agents it may reach: the description
 * lists each with what it does, and `agent` names exactly them, beside one other string.
 */
function overAgents(
  targets: readonly HandoffTarget[],
  intro: string,
  agent: string,
  other: { readonly name: string; readonly description: string; readonly required: boolean },
): Pick<TurnTool, 'description' | 'inputSchema'> {
  const lines = targets.map(({ name, description }) =>
    description === '' ? `- ${name}` : `- ${name}: ${description}`,
  );
  return {
    description: [intro, ...lines].join('\n'),
    inputSchema: {
      type: 'object',
      properties: {
        agent: { type: 'string', enum: targets.map(({ name }) => name), description: agent },
        [other.name]: { type: 'string', description: other.description },
      },
      required: other.required ? ['agent', other.name] : ['agent'],
      additionalProperties: false,
    },
  };
}

/** The definition to offer for `__ask_user`. */
export const askUserTool: TurnTool = {
  name: ReservedTool.AskUser,
  description:
    'Ask the user a clarifying question when the request is ambiguous. The turn pauses until the user answers; the answer is returned as this tool result.',
  inputSchema: {
    type: 'object',
    properties: {
      question: { type: 'string', description: 'The question, written for the user.' },
    },
    required: ['question'],
    additionalProperties: false,
  },
  effect: 'pure',
  needsApproval: false,
};

/**
 * `__delegate_to` for an agent that may delegate to `targets`: the schema names exactly
 * those agents and the description says what each does. The machine decides the call by
 * the agent's `delegates` (turn-delegation.ts), whatever the schema says.
 */
export function delegateToolFor(targets: readonly HandoffTarget[]): TurnTool {
  return {
    name: ReservedTool.DelegateTo,
    ...overAgents(
      targets,
      'Ask another agent to do a task and wait for its answer, which comes back as this tool result. The agent sees only the task you write, not this conversation, so say everything it needs. Several calls in one reply ask several agents. The agents you may ask:',
      'Name of the agent to ask.',
      { name: 'task', description: 'The task, complete in itself.', required: true },
    ),
    effect: 'pure',
    needsApproval: false,
  };
}
