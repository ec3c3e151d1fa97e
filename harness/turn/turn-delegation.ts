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

/**
 * When the control plane committed one of the turn's approval or question requests (its
 * `requested_at_ms`, the control plane's clock): the moment the turn paused for a person.
 */
export interface RequestTime {
  readonly requestId: string;
  readonly requestedAtMs: number;
}

/** An answer to one of the turn's requests, as far as its time goes. */
export interface AnswerTime {
  readonly turnId: string;
  readonly requestId: string;
  readonly answeredAtMs: number;
}

/**
 * A time the turn waited for a person: from the commit of an approval or question request
 * to the commit of its answer, both by the control plane's clock. The whole turn is paused
 * meanwhile, so no thread runs.
 */
export interface PersonWait {
  readonly fromMs: number;
  readonly toMs: number;
}

/**
 * The turn's waits for a person, from the journal alone: each request of `turnId` with a
 * time, until its first answer. A request not answered yet, or recorded without a time
 * (journals written before times were), makes no wait; nor does an answer stamped before
 * its request.
 */
export function personWaits(
  turnId: string,
  requests: readonly RequestTime[],
  answers: readonly AnswerTime[],
): PersonWait[] {
  const waits: PersonWait[] = [];
  for (const { requestId, requestedAtMs } of requests) {
    if (requestedAtMs <= 0) continue;
    const answer = answers.find((a) => a.turnId === turnId && a.requestId === requestId);
    if (answer === undefined || answer.answeredAtMs < requestedAtMs) continue;
    waits.push({ fromMs: requestedAtMs, toMs: answer.answeredAtMs });
  }
  return waits;
}

/**
 * How long a thread opened at `openedAtMs` (the end of the model reply that asked for it)
 * has run when its model reply ends at `atMs`: the time between, less every wait for a
 * person that began after the thread opened and ended before the reply. The turn pauses
 * only once every thread has settled, so a wait is wholly inside a thread's life or wholly
 * outside it, a whole model call away from its ends on either side: the replies' clock
 * (the harness's) and the waits' (the control plane's) need only agree that closely.
 */
export function threadRunMs(
  openedAtMs: number,
  atMs: number,
  waits: readonly PersonWait[],
): number {
  let waited = 0;
  for (const { fromMs, toMs } of waits) {
    if (fromMs >= openedAtMs && toMs <= atMs) waited += toMs - fromMs;
  }
  return atMs - openedAtMs - waited;
}

/** The result a thread that ran past {@link DELEGATION_DEADLINE_MS} gives its caller. */
export function deadlineResult(target: string): string {
  return `Delegation to ${target} stopped: it ran past its deadline of ${DELEGATION_DEADLINE_MS / 1000} s without answering. Do the task yourself or ask for less.`;
}

/** The result of a thread whose agent answered with nothing usable. */
export function emptyAnswerResult(target: string): string {
  return `Delegation to ${target} ended without an answer. Do the task yourself.`;
}
