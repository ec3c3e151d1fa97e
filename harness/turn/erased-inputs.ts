import type { Decoded, TurnLog } from './journal-turns';
import type { Message } from '../../common/model/model-port';
import type { UncheckedStep } from './replay-verdict';

/**
 * What replay cannot check in an attempt because entries were erased (docs/replay.md,
 * "Erased entries"). An erased entry is never a divergence: the step compared with it, and
 * every step whose recorded inputs held it, is listed as not checkable because of it, and
 * everything else is still checked:
 *
 * - an erased step (a tool call, a tool result, a question, the answer) is not compared;
 * - an erased model output cannot be fed back, so the attempt is checked up to it;
 * - a model request that held erased content (the turn's message, an earlier turn's message
 *   or answer in its history, a tool result) cannot have its digest checked; what the model
 *   answered is still fed back and what follows from it checked;
 * - an attempt given erased steps or answers (a resumed attempt) cannot be driven.
 */

/**
 * The kinds an attempt is given from earlier attempts (its recorded steps and answers). An
 * erased question is not among them: the answer is what the machine takes back.
 */
const GIVEN_KINDS: ReadonlySet<string> = new Set([
  'model_call',
  'tool_call',
  'tool_result',
  'question_response',
]);

/** What the message and answer of an erased turn read as in a rebuilt history. */
export const ERASED_TEXT = '[erased]';

/** The history an attempt was given, and the first erased entry it held, if any. */
export interface AttemptHistory {
  readonly history: readonly Message[];
  /** The first erased entry whose content the history held (an earlier message or answer). */
  readonly erasedInput?: { readonly position: number; readonly kind: string };
  /** The text of the summary its dispatch names (`summary_position`), if any. */
  readonly summary?: string;
}

/** The erasure bookkeeping of one attempt. */
export interface ErasureTracker {
  /** The steps the attempt could not check, in the order met. */
  readonly unchecked: UncheckedStep[];
  /** True, and listed, when `found` is an erased entry of `kind`. */
  isErased(found: Decoded, kind: string): boolean;
  /** True, and listed, when the request answered by `found` held erased content. */
  requestHeldErased(found: Decoded): boolean;
  /**
   * The call an erased tool result answered: the one call waiting, from then on an erased
   * input. Undefined, and listed, when several wait (which one it was is gone).
   */
  erasedResultFor(found: Decoded, running: readonly string[]): string | undefined;
  /** True, and listed, when the steps or answers given to the attempt hold an erased one. */
  inputsErased(given: readonly Decoded[]): boolean;
}

export function createErasureTracker(
  log: TurnLog,
  given: AttemptHistory,
  dispatchPosition: number,
): ErasureTracker {
  const listed = new Map<number, UncheckedStep>();
  const list = (step: UncheckedStep): void => {
    if (!listed.has(step.position)) listed.set(step.position, step);
  };
  const kinds = new Map<number, string>();
  for (const [position, erased] of log.erased) kinds.set(position, erased.kind);
  if (given.erasedInput !== undefined) {
    kinds.set(given.erasedInput.position, given.erasedInput.kind);
  }
  const ownMessage = log.erased.has(log.position) ? log.position : undefined;
  const inputs = [ownMessage, given.erasedInput?.position].filter((p) => p !== undefined);
  let heldErased = inputs.length === 0 ? undefined : Math.min(...inputs);
  const kindAt = (position: number): string => kinds.get(position) ?? 'entry';
  return {
    get unchecked() {
      return [...listed.values()];
    },
    isErased(found, kind) {
      if (found.kind !== kind || !log.erased.has(found.position)) return false;
      list({
        position: found.position,
        erasedPosition: found.position,
        what: `${kind} erased: not compared${kind === 'model_call' ? '; its output is gone, so the rest of the attempt is not checked' : ''}`,
      });
      return true;
    },
    requestHeldErased(found) {
      if (heldErased === undefined) return false;
      list({
        position: found.position,
        erasedPosition: heldErased,
        what: `request_sha256 of the model_call: the request held the erased ${kindAt(heldErased)}`,
      });
      return true;
    },
    erasedResultFor(found, running) {
      const [only] = running;
      if (running.length !== 1 || only === undefined) {
        listed.set(found.position, {
          position: found.position,
          erasedPosition: found.position,
          what: 'tool_result erased while several calls waited: which one it answered is gone, so the rest of the attempt is not checked',
        });
        return undefined;
      }
      heldErased ??= found.position;
      return only;
    },
    inputsErased(givenSteps) {
      const erased = givenSteps.find((e) => log.erased.has(e.position) && GIVEN_KINDS.has(e.kind));
      if (erased === undefined) return false;
      list({
        position: dispatchPosition,
        erasedPosition: erased.position,
        what: `the attempt: the steps it resumed from hold the erased ${erased.kind}, so it is not replayed`,
      });
      return true;
    },
  };
}
