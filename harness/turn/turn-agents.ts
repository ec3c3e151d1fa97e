import type { JsonObject } from '../../common/canonical-json';
import type { ModelParameters } from '../../common/model/model-port';
import type { TurnTool } from './turn-records';

/**
 * The agents of one turn and the handoff rule (docs/turns.md, "Handoffs"). Pure: the turn
 * machine asks {@link handoffRefusal} whether a `__handoff_to` call may move the turn, and
 * the answer depends only on what the turn was given and what it has done, so replay
 * decides every handoff the same way.
 */

/** One agent a turn may run under: what its model is given and whom it may hand off to. */
export interface TurnAgent {
  /** The agent's name; '' for a conversation's single unnamed agent. */
  readonly name: string;
  readonly system?: string;
  /** Tools offered to its model, reserved tools included when they apply. */
  readonly tools: readonly TurnTool[];
  /** The parameters its model provider sends; absent: its steps are not recorded for replay. */
  readonly model?: ModelParameters;
  /**
   * Agents it may hand the turn to. Absent: a `__handoff_to` call ends the turn with a
   * `handoff` marker, as turns did before handoffs continued (and as replay of such a
   * journal needs); present: the turn goes on under the target.
   */
  readonly handoffs?: readonly string[];
  /** Agents it may delegate tasks to (turn-delegation.ts); absent or empty: none. */
  readonly delegates?: readonly string[];
  /** Bytes of memory its requests may carry; absent or 0 when it has no memory tool. */
  readonly memoryBudgetBytes?: number;
}

/** What a `__handoff_to` call asks for, once its arguments are read. */
export interface HandoffAsk {
  readonly target: string;
  readonly reason: string;
}

/** The turn as the rule sees it. */
export interface HandoffScene {
  /** The agent answering now. */
  readonly agent: string;
  /** Whom it may hand off to (its `handoffs`). */
  readonly allowed: readonly string[];
  /** Agents that have answered in this turn, first to last. */
  readonly visited: readonly string[];
  /** Every agent the turn was given, by name. */
  readonly roster: ReadonlyMap<string, TurnAgent>;
  /** An earlier call of the same model reply already moves the turn. */
  readonly earlierHandoff?: string;
}

/** Reads `__handoff_to`'s arguments, or says what they must look like. */
export function readHandoffAsk(input: JsonObject): HandoffAsk | string {
  const target = input.agent;
  const reason = input.reason ?? '';
  if (typeof target !== 'string' || target === '' || typeof reason !== 'string') {
    return '__handoff_to needs arguments of the form { agent: string, reason?: string }.';
  }
  return { target, reason };
}

/**
 * Why the turn may not move to `ask.target`, as the tool result its model reads (so it can
 * answer itself or pick another agent), or undefined when it may. Refused: a target this
 * agent may not hand off to, itself, an agent that already answered in this turn (a cycle),
 * an agent the turn was not given, and a second handoff in one model reply.
 */
export function handoffRefusal(scene: HandoffScene, ask: HandoffAsk): string | undefined {
  const { target } = ask;
  const who = scene.agent === '' ? 'This agent' : `Agent ${scene.agent}`;
  if (scene.earlierHandoff !== undefined) {
    return `Handoff to ${target} refused: this reply already hands the turn to ${scene.earlierHandoff}, and a turn moves to one agent at a time.`;
  }
  if (target === scene.agent) {
    return `Handoff to ${target} refused: you are ${target}. Answer the user yourself.`;
  }
  if (!scene.allowed.includes(target)) {
    const may =
      scene.allowed.length === 0
        ? 'may not hand off to any agent'
        : `may hand off only to ${scene.allowed.join(', ')}`;
    return `Handoff to ${target} refused: ${who} ${may}. Answer the user yourself or pick one of those.`;
  }
  if (scene.visited.includes(target)) {
    const path = [...scene.visited, target].join(' -> ');
    return `Handoff to ${target} refused: ${target} already answered in this turn (${path} would be a cycle). Answer the user yourself.`;
  }
  if (!scene.roster.has(target)) {
    return `Handoff to ${target} refused: agent ${target} is not available to this conversation (it may have been deleted or may not be ready). Answer the user yourself.`;
  }
  return undefined;
}

/** The result the handing-off call gets: what the target's model reads in its place. */
export function handoffResult(from: string, ask: HandoffAsk): string {
  const by = from === '' ? 'the previous agent' : from;
  const why = ask.reason === '' ? '' : ` Reason given: ${ask.reason}`;
  return `Handed off to ${ask.target} by ${by}. You are ${ask.target} and answer from here.${why}`;
}
