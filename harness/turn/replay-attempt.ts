import { attemptCharges, chargesBefore, nextPaymentEvent } from './replay-payments';
import { hex, type RequestHasher } from './agent-config';
import { describe, eventJson, voidedCallsOf, type Decoded, type TurnLog } from './journal-turns';
import {
  agentsHandedTo,
  memoryBefore,
  requestTimesBefore,
  type RecordedInputs,
} from './replay-inputs';
import type { ReplayOptions } from './replay-options';
import type { Divergence, UncheckedStep } from './replay-verdict';
import { createErasureTracker, ERASED_TEXT, type AttemptHistory } from './erased-inputs';
import { compareEnd } from './replay-end';
import { responseOf, stepJson, stepOf } from './replay-steps';
import { approvalAnswerFromProto, questionAnswerFromProto } from './request-codec';
import { modelCallFromProto } from './step-codec';
import {
  createTurnMachine,
  pendingModelCall,
  type TurnEffect,
  type TurnEvent,
  type TurnInput,
  type TurnState,
} from './turn-machine';
import type { ApprovalAnswer, QuestionAnswer, TurnStep } from './turn-records';

/**
 * Full replay of one attempt (docs/replay.md, `ReplayMode.Full`): the attempt's input is
 * rebuilt from the journal and driven through the real turn machine; each `call_model` is
 * answered from the recorded `model_call` once the digest of the request the machine built
 * equals the recorded one, each tool call from the recorded `tool_result`, and every step
 * the machine wants to commit, and how it ends or pauses, is compared with the next
 * recorded event. An erased entry (docs/replay.md, "Erased entries") is never a divergence:
 * a step compared with one, or whose inputs held one, is listed as not checkable
 * (`erased-inputs.ts`) and everything else is still checked.
 */

/** Event kinds the harness produces in an attempt (the machine's effects). */
const HARNESS_KINDS: ReadonlySet<string> = new Set([
  'agent_config',
  'model_call',
  'tool_call',
  'tool_result',
  'agent_handoff',
  'approval_request',
  'question_request',
  'handoff',
  'turn_complete',
  'turn_ambiguous',
]);

/** What one attempt's replay found: its first divergence and the steps it could not check. */
export interface AttemptReplay {
  readonly divergence?: Divergence;
  readonly unchecked: readonly UncheckedStep[];
}

/** Replays one attempt: from its `turn_dispatched` to the next one (or the journal's end). */
export function replayAttempt(
  log: TurnLog,
  given: AttemptHistory,
  dispatchPosition: number,
  endPosition: number,
  inputs: RecordedInputs,
  options: ReplayOptions,
  hasher: RequestHasher,
): AttemptReplay {
  const erasures = createErasureTracker(log, given, dispatchPosition);
  const divergence = replayFrom(
    log,
    given,
    dispatchPosition,
    endPosition,
    { ...inputs, options, hasher },
    erasures,
  );
  return { ...(divergence === undefined ? {} : { divergence }), unchecked: erasures.unchecked };
}

interface Recording extends RecordedInputs {
  readonly options: ReplayOptions;
  readonly hasher: RequestHasher;
}

function replayFrom(
  log: TurnLog,
  given: AttemptHistory,
  dispatchPosition: number,
  endPosition: number,
  { configs, configPositions, memoryEvents, options, hasher }: Recording,
  erasures: ReturnType<typeof createErasureTracker>,
): Divergence | undefined {
  const voided = voidedCallsOf(log);
  const before = log.events.filter((e) => e.position < dispatchPosition && !voided.has(e.position));
  // Steps or answers the attempt was given were erased: it cannot be driven.
  if (erasures.inputsErased(before)) return undefined;
  // An admin's resolution ends the attempt: the tool_result it records for `ran` is the
  // admin's, not the machine's, and is a recorded step of the next attempt.
  const resolvedAt =
    log.events.find((e) => e.kind === 'turn_resolved' && e.position > dispatchPosition)?.position ??
    Number.POSITIVE_INFINITY;
  const recorded = log.events.filter(
    (e) =>
      e.position > dispatchPosition &&
      e.position < Math.min(endPosition, resolvedAt) &&
      HARNESS_KINDS.has(e.kind),
  );
  const lastPosition = recorded.at(-1)?.position ?? dispatchPosition;
  // A resumed attempt (after an answer) starts inside the round trip of its last recorded
  // model call, not before the first.
  let step = Math.max(
    0,
    ...before.flatMap((e) => (e.kind === 'model_call' ? [e.payload.step] : [])),
  );
  const diverge = (expected: string, found: Decoded | undefined): Divergence => ({
    turnId: log.turnId,
    step,
    position: found?.position ?? lastPosition,
    expected,
    found: found === undefined ? 'nothing (the attempt ends here)' : describe(found),
  });
  const newestBefore = configPositions.filter((c) => c.position < dispatchPosition).at(-1);
  const ownConfig = recorded.find((e) => e.kind === 'agent_config');
  const inForce =
    ownConfig?.kind === 'agent_config' ? hex(ownConfig.payload.sha256) : newestBefore?.sha256;
  const config = inForce === undefined ? undefined : configs.get(inForce);
  if (config === undefined) {
    const first = recorded.find((e) => e.kind === 'model_call');
    return diverge('an agent_config in force for the attempt', first);
  }
  const charges = attemptCharges(log.events, dispatchPosition, Math.min(endPosition, resolvedAt));
  const approvalAnswers: ApprovalAnswer[] = [];
  const questionAnswers: QuestionAnswer[] = [];
  const recordedSteps: TurnStep[] = [];
  for (const e of before) {
    if (e.kind === 'approval_response') approvalAnswers.push(approvalAnswerFromProto(e.payload));
    if (e.kind === 'question_response') questionAnswers.push(questionAnswerFromProto(e.payload));
    const recordedStep = stepOf(e);
    if (recordedStep !== undefined) recordedSteps.push(recordedStep);
  }
  if (approvalAnswers.length > 0 && options.approvalPublicKey === undefined) {
    return diverge(
      'an approval public key to verify the recorded answers with (pass one; docs/replay.md)',
      undefined,
    );
  }
  const { config: agent } = config;
  const input: TurnInput = {
    turnId: log.turnId,
    ...(agent.system === '' ? {} : { system: agent.system }),
    history: given.history,
    ...(given.summary === undefined ? {} : { summary: given.summary }),
    userMessage: log.erased.has(log.position) ? ERASED_TEXT : log.text,
    tools: agent.tools,
    budget: agent.budget,
    recordedSteps,
    approvalAnswers,
    questionAnswers,
    paymentCharges: chargesBefore(before),
    requestTimes: requestTimesBefore(before),
    ...(agent.requiredApprover === '' ? {} : { requiredApprover: agent.requiredApprover }),
    model: agent.model,
    ...(agent.agent === undefined ? {} : { agentName: agent.agent }),
    ...(agent.handoffs === undefined ? {} : { handoffs: agent.handoffs }),
    ...(agent.delegates === undefined ? {} : { delegates: agent.delegates }),
    agents: agentsHandedTo(recorded, configs, agent.agent ?? '', options.otherAgents),
    ...(newestBefore === undefined ? {} : { recordedConfigSha256: newestBefore.sha256 }),
    ...(agent.memoryBudgetBytes === undefined
      ? {}
      : {
          memoryBudgetBytes: agent.memoryBudgetBytes,
          memory: memoryBefore(memoryEvents, dispatchPosition),
        }),
  };
  options.onAttempt?.({
    turnId: log.turnId,
    dispatchPosition,
    input,
    steps: recorded.flatMap((e) => {
      const recordedStep = stepOf(e);
      return recordedStep === undefined ? [] : [{ position: e.position, step: recordedStep }];
    }),
  });
  const machine = createTurnMachine({
    ids: options.ids,
    verifier: options.verifier,
    approvalPublicKey: options.approvalPublicKey ?? new Uint8Array(32),
    requestSha256: hasher,
  });
  let cursor = 0;
  const peek = (): Decoded | undefined => recorded[cursor];
  let state: TurnState = machine.initialState;
  let event: TurnEvent | undefined = { type: 'turn_started', input };
  const running: string[] = [];
  /** Paid calls whose charge the machine asked for, waiting for the recorded one. */
  const charging: string[] = [];
  /** Model calls asked and not yet answered, each with the request digest the machine built. */
  const asked: AskedModel[] = [];
  /** The model call whose request digest is not checkable, and the digest the machine built. */
  let digestUnchecked: number | undefined;
  let builtDigest = Buffer.alloc(0);
  while (event !== undefined) {
    const result = machine.step(state, event);
    state = result.state;
    event = undefined;
    for (const effect of result.effects) {
      const found = peek();
      if (found?.kind === 'turn_ambiguous' && !matchesAmbiguous(effect, found)) {
        // The control plane quarantined the attempt (a refused step, or attempts spent
        // with a side effect in doubt): what the machine wanted was never committed.
        return undefined;
      }
      switch (effect.type) {
        case 'commit_step': {
          if (found === undefined) return undefined; // the attempt was cut short: an orphan
          const expected = stepJson(effect.step);
          if (expected.kind === found.kind && erasures.isErased(found, expected.kind)) {
            cursor += 1;
            break;
          }
          // A request digest not checkable (its request held erased content) is not compared.
          const compared =
            found.kind === 'model_call' && found.position === digestUnchecked
              ? eventJson({ ...found, payload: { ...found.payload, requestSha256: builtDigest } })
              : eventJson(found);
          if (expected.kind !== found.kind || expected.json !== compared) {
            return diverge(`${expected.kind} ${expected.json}`, found);
          }
          cursor += 1;
          break;
        }
        case 'call_model':
          // Answered below, from the journal: threads' calls run side by side, and the
          // journal's order says which answer came first.
          asked.push({
            step: effect.step,
            thread: effect.thread ?? '',
            messages: effect.request.messages.length,
            built: pendingModelCall(state, effect.thread ?? '')?.requestSha256,
          });
          break;
        case 'call_tool':
        case 'call_trusted_tool':
          running.push(effect.call.toolCallId);
          break;
        case 'request_charge':
          charging.push(effect.call.toolCallId);
          break;
        case 'settle_payment':
          // The paid response is the call's recorded tool_result.
          running.push(effect.call.toolCallId);
          break;
        case 'finish':
        case 'pause_for_approval':
        case 'pause_for_question':
        case 'handoff':
        case 'ambiguous':
        case 'fail':
        case 'cancelled': {
          const verdict = compareEnd(effect, found, erasures);
          if (verdict.kind === 'unchecked') return undefined;
          if (verdict.kind === 'diverged') return diverge(verdict.expected, found);
          cursor += 1;
          return extra(recorded, cursor, diverge);
        }
        default: {
          const never: never = effect;
          return never;
        }
      }
    }
    if (event === undefined && asked.length > 0) {
      // A model call's answer may be preceded by its agent's configuration committed again
      // (another thread committed one meanwhile): the call answered is the one after it.
      let ahead = cursor;
      while (recorded[ahead]?.kind === 'agent_config') ahead += 1;
      const found = recorded[ahead]?.kind === 'model_call' ? recorded[ahead] : peek();
      if (found === undefined) return undefined; // the attempt was cut short: an orphan
      // An erased output cannot be fed back: nothing after it in the attempt is checked.
      if (erasures.isErased(found, 'model_call')) return undefined;
      const index =
        found.kind === 'model_call'
          ? asked.findIndex(
              (a) => a.step === found.payload.step && a.thread === (found.payload.thread ?? ''),
            )
          : -1;
      const call = asked[index];
      if (call === undefined) {
        if (running.length === 0 || found.kind === 'model_call') {
          return diverge(`model_call for ${asked.map(describeAsked).join(' or ')}`, found);
        }
      } else if (found.kind === 'model_call') {
        asked.splice(index, 1);
        step = call.step;
        const digest = hex(found.payload.requestSha256);
        const { built } = call;
        if (erasures.requestHeldErased(found)) {
          // The request held erased content: its digest cannot be checked, the rest can.
          digestUnchecked = found.position;
          builtDigest = Buffer.from(built ?? new Uint8Array());
        } else if (built === undefined || hex(built) !== digest) {
          return diverge(
            `model_call whose request_sha256 is ${built === undefined ? '(none)' : hex(built)} (the request the machine built from ${call.messages} messages)`,
            found,
          );
        }
        const record = modelCallFromProto(found.payload);
        event = {
          type: 'model_responded',
          response: responseOf(record),
          startedAtMs: record.startedAtMs,
          finishedAtMs: record.finishedAtMs,
          ...(call.thread === '' ? {} : { thread: call.thread }),
        };
        continue;
      }
    }
    const paying =
      event === undefined ? nextPaymentEvent(charging, running, charges, peek()) : undefined;
    if (paying !== undefined) {
      if ('missing' in paying) return diverge(`a payment_charge for ${paying.missing}`, peek());
      event = paying;
      continue;
    }
    if (event === undefined && running.length > 0) {
      const found = peek();
      if (found === undefined) return undefined; // the attempt was cut short: an orphan
      if (found.kind === 'turn_ambiguous') {
        const id = found.payload.toolCallId;
        if (!running.includes(id)) return diverge(`a tool_result for ${running.join(', ')}`, found);
        running.splice(running.indexOf(id), 1);
        event = { type: 'tool_outcome_unknown', toolCallId: id, reason: found.payload.reason };
        continue;
      }
      if (erasures.isErased(found, 'tool_result')) {
        // Its content and call id are gone: fed back as erased when one call waits, and
        // the requests after it hold erased content. Among several, which one is unknown.
        const id = erasures.erasedResultFor(found, running);
        if (id === undefined) return undefined;
        running.splice(running.indexOf(id), 1);
        event = { type: 'tool_finished', toolCallId: id, outcome: erasedOutcome };
        continue;
      }
      if (found.kind !== 'tool_result' || !running.includes(found.payload.toolCallId)) {
        return diverge(`a tool_result for ${running.join(', ')}`, found);
      }
      running.splice(running.indexOf(found.payload.toolCallId), 1);
      // A trusted tool's answer arrives the same way; the machine does not tell them apart.
      event = {
        type: 'tool_finished',
        toolCallId: found.payload.toolCallId,
        outcome: { content: found.payload.content, isError: found.payload.isError },
      };
    }
  }
  return extra(recorded, cursor, diverge);
}

const erasedOutcome = { content: ERASED_TEXT, isError: false } as const;

/** A model call the machine asked for, waiting for its recorded answer. */
interface AskedModel {
  readonly step: number;
  /** Its delegation thread; '' for the turn's own. */
  readonly thread: string;
  readonly messages: number;
  readonly built: Uint8Array | undefined;
}

function describeAsked({ step, thread }: AskedModel): string {
  return thread === '' ? `step ${step}` : `step ${step} of thread ${thread}`;
}

function extra(
  recorded: readonly Decoded[],
  cursor: number,
  diverge: (expected: string, found: Decoded | undefined) => Divergence,
): Divergence | undefined {
  const left = recorded[cursor];
  return left === undefined ? undefined : diverge('nothing more in this attempt', left);
}

function matchesAmbiguous(effect: TurnEffect, found: Decoded): boolean {
  return (
    found.kind === 'turn_ambiguous' &&
    effect.type === 'ambiguous' &&
    effect.toolCallId === found.payload.toolCallId
  );
}
