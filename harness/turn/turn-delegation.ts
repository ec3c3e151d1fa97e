import type { JsonObject } from '../../common/canonical-json';
import { DELEGATION_DEADLINE_MS, MAX_DELEGATION_DEPTH } from '../../common/delegation';
import type { TurnAgent } from './turn-agents';

/**
 * Delegation, agents as tools (docs/turns.md, "Delegation"): the rule deciding whether an
 * agent's `__delegate_to` call may start a thread under another agent. Pure, like the
 * handoff rule (turn-agents.ts): the answer depends only on what the turn was given and
 * the thread's lineage, so replay decides every delegation the same way.
 */

/** What a `__delegate_to` call asks for, once its arguments are read. */
export interface DelegateAsk {
  readonly target: string;
  /** The task, written for the delegate: it is all the delegate is told. */
  readonly task: string;
}

/** The thread asking, as the rule sees it. */
export interface DelegationScene {
  /** The agent asking. */
  readonly agent: string;
  /** Whom it may delegate to (its `delegates`). */
  readonly allowed: readonly string[];
  /** The agents of the threads above this one, outermost first; empty at the top. */
  readonly ancestors: readonly string[];
  /** The asking thread's depth (0 at the top). */
  readonly depth: number;
  /** Every agent the turn was given, by name. */
  readonly roster: ReadonlyMap<string, TurnAgent>;
}

/** Reads `__delegate_to`'s arguments, or says what they must look like. */
export function readDelegateAsk(input: JsonObject): DelegateAsk | string {
  const { agent: target, task } = input;
  if (typeof target !== 'string' || target === '' || typeof task !== 'string' || !task.trim()) {
    return '__delegate_to needs arguments of the form { agent: string, task: string } with a task that is not empty.';
  }
  return { target, task };
}

/**
 * Why `ask.target` may not take the task, as the tool result the asking model reads (so it
 * can do the work itself or ask another), or undefined when it may. Refused: an agent this
 * one may not delegate to, itself or any agent above it (a cycle), a thread deeper than
 * {@link MAX_DELEGATION_DEPTH}, and an agent the turn was not given.
 */
export function delegationRefusal(scene: DelegationScene, ask: DelegateAsk): string | undefined {
  const { target } = ask;
  const who = scene.agent === '' ? 'This agent' : `Agent ${scene.agent}`;
  if (!scene.allowed.includes(target)) {
    const may =
      scene.allowed.length === 0
        ? 'may not delegate to any agent'
        : `may delegate only to ${scene.allowed.join(', ')}`;
    return `Delegation to ${target} refused: ${who} ${may}. Do the task yourself or pick one of those.`;
  }
  const chain = [...scene.ancestors, scene.agent];
  if (chain.includes(target)) {
    const path = [...chain, target].join(' -> ');
    return `Delegation to ${target} refused: ${target} is already working on this request above you (${path} would be a cycle). Do the task yourself.`;
  }
  if (scene.depth + 1 > MAX_DELEGATION_DEPTH) {
    return `Delegation to ${target} refused: delegations nest at most ${MAX_DELEGATION_DEPTH} deep and this one would be ${scene.depth + 1} deep. Do the task yourself.`;
  }
  if (!scene.roster.has(target)) {
    return `Delegation to ${target} refused: agent ${target} is not available to this conversation (it may have been deleted or may not be ready). Do the task yourself.`;
  }
  return undefined;
}

/** The result a thread that ran past {@link DELEGATION_DEADLINE_MS} gives its caller. */
export function deadlineResult(target: string): string {
  return `Delegation to ${target} stopped: it ran past its deadline of ${DELEGATION_DEADLINE_MS / 1000} s without answering. Do the task yourself or ask for less.`;
}

/** The result of a thread whose agent answered with nothing usable. */
export function emptyAnswerResult(target: string): string {
  return `Delegation to ${target} ended without an answer. Do the task yourself.`;
}
