import { canonicalJson, isJsonObject } from '../../common/canonical-json';
import { AppError, isAppError } from '../../common/errors';
import {
  decodePayload,
  isEventKind,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
} from '../../common/event-kinds';
import { voidedToolCalls } from '../../common/turn-resolution';
import { StandingState, standingOf, type TurnStanding } from '../../common/turn-standing';
import { ResolveDecision } from '../../proto/gen/polychrome/events/v1/events';
import {
  approvalAnswerFromProto,
  approvalRequestToProto,
  handoffToProto,
  questionAnswerFromProto,
  questionRequestToProto,
} from './request-codec';
import {
  modelCallFromProto,
  toolCallFromProto,
  toolResultFromProto,
  turnStepToProto,
} from './step-codec';
import type { Message, ModelResponse, OutputBlock } from './ports/model-port';
import {
  createPrefixRequestHasher,
  decodeAgentConfig,
  hex,
  type EncodedAgentConfig,
  type RequestHasher,
} from './agent-config';
import { verifyApprovalAnswer, type SignatureVerifier } from './approval-token';
import type { RequestIds } from '../../common/request-ids';
import {
  createTurnMachine,
  type TurnEffect,
  type TurnEvent,
  type TurnInput,
  type TurnState,
} from './turn-machine';
import type { ApprovalAnswer, ModelCallRecord, QuestionAnswer, TurnStep } from './turn-records';

/**
 * Replay (docs/replay.md): every committed turn of a journal driven through the real turn
 * machine (`turn-machine.ts`), fed only from the journal, with no model and no tool.
 * Each `call_model` is answered from the recorded `model_call` once the digest of the
 * request the machine built equals the recorded one; each tool call from the recorded
 * `tool_result`; approvals from the recorded signed answers, verified by the machine with
 * the approval public key. Every step the machine wants to commit, and how it ends or
 * pauses, is compared with the next recorded event of the attempt. Pure: the journal comes
 * in decoded, the verdicts go out.
 */

/** One journal event as read from the state plane or an export. */
export interface ReplayEntry {
  readonly position: number;
  readonly kind: string;
  readonly payload: Uint8Array;
}

/** What replay needs besides the journal. */
export interface ReplayOptions {
  readonly ids: RequestIds;
  readonly verifier: SignatureVerifier;
  /**
   * The control plane's approval public key (raw 32 bytes). Without it a turn with an
   * approval answer cannot be checked and is reported `unverifiable`.
   */
  readonly approvalPublicKey?: Uint8Array;
  /**
   * How request digests are computed; default: the digest of docs/replay.md
   * (`createPrefixRequestHasher`). What-if hashes under the recorded configuration digest.
   */
  readonly requestHasher?: RequestHasher;
  /**
   * Told each attempt's rebuilt input before it is replayed (`--live` starts a scratch
   * run from it, harness/turn/live.ts). Must not throw.
   */
  readonly onAttempt?: (attempt: ReplayAttempt) => void;
}

/** An attempt as replay rebuilt it from the journal. */
export interface ReplayAttempt {
  readonly turnId: string;
  readonly dispatchPosition: number;
  /** The machine's input: the steps and answers recorded before the dispatch. */
  readonly input: TurnInput;
  /** The steps the attempt itself recorded, with their positions, in journal order. */
  readonly steps: readonly { readonly position: number; readonly step: TurnStep }[];
}

/** The first place a recorded turn does not follow from its inputs. */
export interface Divergence {
  readonly turnId: string;
  /** The model round trip (1-based) the machine was in; 0 before the first. */
  readonly step: number;
  /** Journal position of the event found, or the turn's last position when one is missing. */
  readonly position: number;
  readonly expected: string;
  readonly found: string;
}

/** Where a turn stands in the journal, in replay's words (the rule: common/turn-standing.ts). */
export const ReplayTurnStatus = {
  Complete: 'complete',
  Paused: 'paused',
  Handoff: 'handoff',
  /** `turn_ambiguous`: quarantined, never retried automatically. */
  Quarantined: 'quarantined',
  /** An admin resolved its quarantine (`turn_resolved`); not dispatched again yet. */
  Resolved: 'resolved',
  /** Dispatched, never settled or paused. */
  Orphaned: 'orphaned',
  /** Never dispatched. */
  Received: 'received',
} as const;
export type ReplayTurnStatus = (typeof ReplayTurnStatus)[keyof typeof ReplayTurnStatus];

/** Replay's name for each standing: settled with a reply, a fallback or a cancel is complete. */
const REPLAY_STATUS_OF: { readonly [S in StandingState]: ReplayTurnStatus } = {
  [StandingState.Received]: ReplayTurnStatus.Received,
  [StandingState.Running]: ReplayTurnStatus.Orphaned,
  [StandingState.AwaitingApproval]: ReplayTurnStatus.Paused,
  [StandingState.AwaitingAnswer]: ReplayTurnStatus.Paused,
  [StandingState.HandedOff]: ReplayTurnStatus.Handoff,
  [StandingState.Quarantined]: ReplayTurnStatus.Quarantined,
  [StandingState.Resolved]: ReplayTurnStatus.Resolved,
  [StandingState.Complete]: ReplayTurnStatus.Complete,
  [StandingState.Failed]: ReplayTurnStatus.Complete,
  [StandingState.Cancelled]: ReplayTurnStatus.Complete,
};

/** How a turn was replayed. */
export const ReplayMode = {
  /** Recorded configuration and request digests: every step checked by the machine. */
  Full: 'full',
  /**
   * Recorded before configurations were (no `agent_config`): outputs are re-read, tool
   * calls checked against them and the final text against the last reply; requests and
   * budgets cannot be checked.
   */
  Weak: 'weak',
} as const;
export type ReplayMode = (typeof ReplayMode)[keyof typeof ReplayMode];

/** A block of the reconstructed transcript. */
export type TranscriptItem =
  | { readonly type: 'user'; readonly text: string }
  | { readonly type: 'assistant'; readonly text: string }
  | { readonly type: 'tool_call'; readonly name: string; readonly argsJson: string }
  | { readonly type: 'tool_result'; readonly content: string; readonly isError: boolean }
  | { readonly type: 'approval'; readonly toolName: string; readonly decision: string }
  | { readonly type: 'question'; readonly question: string; readonly answer?: string };

/** The verdict on one turn. */
export interface TurnReplay {
  readonly turnId: string;
  readonly position: number;
  readonly status: ReplayTurnStatus;
  readonly mode: ReplayMode;
  readonly attempts: number;
  readonly ok: boolean;
  readonly divergence?: Divergence;
  /** Set for quarantined turns: the recorded reason. */
  readonly note?: string;
  /** Every `turn_resolved` of the turn: who settled a quarantine, and how. */
  readonly resolutions?: readonly ReplayResolution[];
  readonly transcript: readonly TranscriptItem[];
}

/** An admin's `turn_resolved`, as replay reports it. */
export interface ReplayResolution {
  readonly position: number;
  readonly decision: 'ran' | 'did_not_run';
  readonly toolCallId: string;
  /** `ran` without a result: the turn was told the outcome is unknown. */
  readonly resultUnknown: boolean;
  readonly actor: string;
  readonly caller: string;
}

/** The verdict on a journal. */
export interface JournalReplay {
  readonly ok: boolean;
  readonly events: number;
  readonly turns: readonly TurnReplay[];
  /** Excised or unknown positions, skipped and reported. */
  readonly skipped: readonly { readonly position: number; readonly kind: string }[];
  /** The first divergence over all turns, if any. */
  readonly divergence?: Divergence;
}

type Decoded = {
  [K in EventKind]: { position: number; kind: K; payload: EventPayloads[K] };
}[EventKind];

interface TurnLog {
  readonly turnId: string;
  readonly position: number;
  readonly text: string;
  readonly directive: EventPayloads['ingress_directive'] | undefined;
  /** The turn's events after its message, in journal order. */
  readonly events: Decoded[];
}

/** Event kinds the harness produces in an attempt (the machine's effects). */
const HARNESS_KINDS: ReadonlySet<string> = new Set([
  'agent_config',
  'model_call',
  'tool_call',
  'tool_result',
  'approval_request',
  'question_request',
  'handoff',
  'turn_complete',
  'turn_ambiguous',
]);

/**
 * Replays a journal.
 *
 * @throws AppError `data_loss` when an event does not decode or a recorded configuration
 *   is not readable (the journal must be verified first).
 */
export function replayJournal(
  entries: readonly ReplayEntry[],
  options: ReplayOptions,
): JournalReplay {
  const skipped: { position: number; kind: string }[] = [];
  const turns = new Map<string, TurnLog>();
  const order: TurnLog[] = [];
  const configs = new Map<string, EncodedAgentConfig>();
  /** Position and digest of every agent_config, in order. */
  const configPositions: { position: number; sha256: string }[] = [];
  for (const entry of entries) {
    if (!isEventKind(entry.kind)) {
      // Seam for excision (docs/replay.md): an excised or unknown position is skipped.
      skipped.push({ position: entry.position, kind: entry.kind });
      continue;
    }
    const event = decode(entry);
    if (event.kind === 'agent_config') {
      const encoded = decodeAgentConfig(event.payload.configJson);
      if (hex(encoded.sha256) !== hex(event.payload.sha256)) {
        throw new AppError(
          'data_loss',
          `journal position ${event.position} (agent_config): its digest is not the SHA-256 of its config_json; verify the journal`,
        );
      }
      configs.set(hex(encoded.sha256), encoded);
      configPositions.push({ position: event.position, sha256: hex(encoded.sha256) });
    }
    if (event.kind === 'message_received') {
      if (turns.has(event.payload.turnId)) continue;
      const log: TurnLog = {
        turnId: event.payload.turnId,
        position: event.position,
        text: event.payload.text,
        directive: undefined,
        events: [],
      };
      turns.set(log.turnId, log);
      order.push(log);
      continue;
    }
    const turnId = turnIdOf(event);
    if (turnId === undefined) continue;
    const log = turns.get(turnId);
    if (log === undefined) continue;
    if (event.kind === 'ingress_directive' && log.directive === undefined) {
      turns.set(turnId, { ...log, directive: event.payload });
      const index = order.indexOf(log);
      order[index] = turns.get(turnId) ?? log;
      continue;
    }
    log.events.push(event);
  }
  const history: Message[] = [];
  const results: TurnReplay[] = [];
  const hasher = options.requestHasher ?? createPrefixRequestHasher();
  for (const log of order) {
    const result = replayTurn(log, history, configs, configPositions, options, hasher);
    results.push(result);
    const terminal = log.events.find((e) => e.kind === 'turn_complete');
    const dispatched = log.events.some((e) => e.kind === 'turn_dispatched');
    if (terminal?.kind === 'turn_complete' && dispatched) {
      history.push(
        { role: 'user', content: [{ type: 'text', text: log.text }] },
        { role: 'assistant', content: [{ type: 'text', text: terminal.payload.text }] },
      );
    }
  }
  const divergence = results.find((r) => r.divergence !== undefined)?.divergence;
  return {
    ok: results.every((r) => r.ok),
    events: entries.length,
    turns: results,
    skipped,
    ...(divergence === undefined ? {} : { divergence }),
  };
}

function replayTurn(
  log: TurnLog,
  history: readonly Message[],
  configs: ReadonlyMap<string, EncodedAgentConfig>,
  configPositions: readonly { position: number; sha256: string }[],
  options: ReplayOptions,
  hasher: RequestHasher,
): TurnReplay {
  const standing = standingOf(log.events);
  const status = REPLAY_STATUS_OF[standing.state];
  const transcript = transcriptOf(log);
  const dispatches = log.events.filter((e) => e.kind === 'turn_dispatched');
  const base = { turnId: log.turnId, position: log.position, status, transcript };
  const full = log.events.some((e) => e.kind === 'model_call' && e.payload.configSha256.length > 0);
  if (!full) {
    const divergence = weakCheck(log, options);
    return {
      ...base,
      mode: ReplayMode.Weak,
      attempts: dispatches.length,
      ok: divergence === undefined,
      ...(divergence === undefined ? {} : { divergence }),
      ...noteOf(log, standing),
    };
  }
  for (const [index, dispatch] of dispatches.entries()) {
    const next = dispatches[index + 1];
    const end = next === undefined ? Number.POSITIVE_INFINITY : next.position;
    const divergence = replayAttempt(
      log,
      history,
      dispatch.position,
      end,
      configs,
      configPositions,
      options,
      hasher,
    );
    if (divergence !== undefined) {
      return { ...base, mode: ReplayMode.Full, attempts: dispatches.length, ok: false, divergence };
    }
  }
  return {
    ...base,
    mode: ReplayMode.Full,
    attempts: dispatches.length,
    ok: true,
    ...noteOf(log, standing),
  };
}

/** Replays one attempt: from its `turn_dispatched` to the next one (or the journal's end). */
function replayAttempt(
  log: TurnLog,
  history: readonly Message[],
  dispatchPosition: number,
  endPosition: number,
  configs: ReadonlyMap<string, EncodedAgentConfig>,
  configPositions: readonly { position: number; sha256: string }[],
  options: ReplayOptions,
  hasher: RequestHasher,
): Divergence | undefined {
  const voided = voidedCallsOf(log);
  const before = log.events.filter((e) => e.position < dispatchPosition && !voided.has(e.position));
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
    history,
    userMessage: log.text,
    tools: agent.tools,
    budget: agent.budget,
    recordedSteps,
    approvalAnswers,
    questionAnswers,
    ...(agent.requiredApprover === '' ? {} : { requiredApprover: agent.requiredApprover }),
    model: agent.model,
    ...(newestBefore === undefined ? {} : { recordedConfigSha256: newestBefore.sha256 }),
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
          if (expected.kind !== found.kind || expected.json !== eventJson(found)) {
            return diverge(`${expected.kind} ${expected.json}`, found);
          }
          cursor += 1;
          break;
        }
        case 'call_model': {
          step = effect.step;
          if (found === undefined) return undefined;
          if (found.kind !== 'model_call' || found.payload.step !== effect.step) {
            return diverge(`model_call for step ${effect.step}`, found);
          }
          const want = effect.request;
          const digest = hex(found.payload.requestSha256);
          const built = state.pendingModel?.requestSha256;
          if (built === undefined || hex(built) !== digest) {
            return diverge(
              `model_call whose request_sha256 is ${built === undefined ? '(none)' : hex(built)} (the request the machine built from ${want.messages.length} messages)`,
              found,
            );
          }
          const record = modelCallFromProto(found.payload);
          event = {
            type: 'model_responded',
            response: responseOf(record),
            startedAtMs: record.startedAtMs,
            finishedAtMs: record.finishedAtMs,
          };
          break;
        }
        case 'call_tool':
        case 'call_trusted_tool':
          running.push(effect.call.toolCallId);
          break;
        case 'finish': {
          if (found?.kind !== 'turn_complete') {
            return diverge(`turn_complete with text ${JSON.stringify(effect.text)}`, found);
          }
          const p = found.payload;
          if (
            p.text !== effect.text ||
            p.steps !== effect.steps ||
            p.fallback !== effect.fallback
          ) {
            return diverge(
              `turn_complete ${canonicalJson({ text: effect.text, steps: effect.steps, fallback: effect.fallback })}`,
              found,
            );
          }
          cursor += 1;
          return extra(recorded, cursor, diverge);
        }
        case 'pause_for_approval': {
          if (found === undefined) return undefined;
          const want = canonicalJson(
            payloadCodecs.approval_request.toJSON(approvalRequestToProto(effect.request)),
          );
          // requested_at_ms is the control plane's clock, stamped at commit (docs/turns.md,
          // "Expiry"): the machine never makes it, so it is not compared.
          if (
            found.kind !== 'approval_request' ||
            eventJson({ ...found, payload: { ...found.payload, requestedAtMs: 0 } }) !== want
          ) {
            return diverge(`approval_request ${want}`, found);
          }
          cursor += 1;
          return extra(recorded, cursor, diverge);
        }
        case 'pause_for_question': {
          if (found === undefined) return undefined;
          const want = canonicalJson(
            payloadCodecs.question_request.toJSON(questionRequestToProto(effect.request)),
          );
          if (found.kind !== 'question_request' || eventJson(found) !== want) {
            return diverge(`question_request ${want}`, found);
          }
          cursor += 1;
          return extra(recorded, cursor, diverge);
        }
        case 'handoff': {
          const want = canonicalJson(payloadCodecs.handoff.toJSON(handoffToProto(effect.handoff)));
          if (found?.kind !== 'handoff' || eventJson(found) !== want) {
            return diverge(`handoff ${want}`, found);
          }
          cursor += 1;
          return extra(recorded, cursor, diverge);
        }
        case 'ambiguous':
          if (found?.kind !== 'turn_ambiguous') {
            return diverge(`turn_ambiguous for tool call ${effect.toolCallId}`, found);
          }
          cursor += 1;
          return extra(recorded, cursor, diverge);
        case 'fail':
        case 'cancelled':
          // The control plane settles a failed attempt (a retry or the fallback reply).
          return found === undefined || found.kind === 'turn_complete'
            ? undefined
            : diverge(`nothing more (the machine ${effect.type}: ${describeEnd(effect)})`, found);
        default: {
          const never: never = effect;
          return never;
        }
      }
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

/** A recorded model call, tool call or tool result as the machine takes it back. */
function stepOf(e: Decoded): TurnStep | undefined {
  switch (e.kind) {
    case 'model_call':
      return { kind: 'model_call', record: modelCallFromProto(e.payload) };
    case 'tool_call':
      return { kind: 'tool_call', record: toolCallFromProto(e.payload) };
    case 'tool_result':
      return { kind: 'tool_result', record: toolResultFromProto(e.payload) };
    default:
      return undefined;
  }
}

/** The `tool_call`s `did_not_run` resolutions void (common/turn-resolution.ts). */
function voidedCallsOf(log: TurnLog): ReadonlySet<number> {
  return voidedToolCalls(
    log.events.flatMap((e) =>
      e.kind === 'turn_resolved'
        ? [
            {
              position: e.position,
              toolCallId: e.payload.toolCallId,
              didNotRun: e.payload.decision === ResolveDecision.RESOLVE_DECISION_DID_NOT_RUN,
            },
          ]
        : [],
    ),
    log.events.flatMap((e) =>
      e.kind === 'tool_call' ? [{ position: e.position, toolCallId: e.payload.toolCallId }] : [],
    ),
  );
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

/** The weak mode: outputs re-read, calls and the final text checked against them. */
function weakCheck(log: TurnLog, options: ReplayOptions): Divergence | undefined {
  const uses = new Map<string, { name: string; argsJson: string }>();
  let lastText: string | undefined;
  let step = 0;
  for (const e of log.events) {
    const diverge = (expected: string): Divergence => ({
      turnId: log.turnId,
      step,
      position: e.position,
      expected,
      found: describe(e),
    });
    switch (e.kind) {
      case 'model_call': {
        step = e.payload.step;
        const record = modelCallFromProto(e.payload);
        for (const block of record.content) {
          if (block.type === 'tool_use') uses.set(block.toolCallId, block);
        }
        lastText = record.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
        break;
      }
      case 'tool_call': {
        const use = uses.get(e.payload.toolCallId);
        if (
          use === undefined ||
          use.name !== e.payload.toolName ||
          use.argsJson !== e.payload.argsJson
        ) {
          return diverge(
            use === undefined
              ? `no tool_call: no model output asked for ${e.payload.toolCallId}`
              : `tool_call ${use.name} ${use.argsJson}`,
          );
        }
        break;
      }
      case 'approval_response': {
        const key = options.approvalPublicKey;
        if (key === undefined) break;
        const answer = approvalAnswerFromProto(e.payload);
        const request = log.events.find(
          (r) => r.kind === 'approval_request' && r.payload.requestId === answer.requestId,
        );
        if (request?.kind !== 'approval_request') break;
        const pending = {
          turnId: log.turnId,
          requestId: request.payload.requestId,
          toolName: request.payload.toolName,
          argsSha256: request.payload.argsSha256,
        };
        if (!verifyApprovalAnswer(answer, pending, options.verifier, key).ok) {
          return diverge(
            `an approval_response signed by the approval key for ${pending.requestId}`,
          );
        }
        break;
      }
      case 'turn_complete':
        if (!e.payload.fallback && lastText !== undefined && e.payload.text !== lastText) {
          return diverge(`turn_complete with the last reply's text ${JSON.stringify(lastText)}`);
        }
        break;
      default:
        break;
    }
  }
  return undefined;
}

/** The reason of the quarantine that stands (none once resolved), and the resolutions. */
function noteOf(
  log: TurnLog,
  standing: TurnStanding,
): { note?: string; resolutions?: ReplayResolution[] } {
  const resolutions = log.events.flatMap((e): ReplayResolution[] =>
    e.kind === 'turn_resolved'
      ? [
          {
            position: e.position,
            decision:
              e.payload.decision === ResolveDecision.RESOLVE_DECISION_RAN ? 'ran' : 'did_not_run',
            toolCallId: e.payload.toolCallId,
            resultUnknown: e.payload.resultUnknown,
            actor: e.payload.actor,
            caller: e.payload.caller,
          },
        ]
      : [],
  );
  return {
    ...(standing.state === StandingState.Quarantined ? { note: standing.reason } : {}),
    ...(resolutions.length === 0 ? {} : { resolutions }),
  };
}

function transcriptOf(log: TurnLog): TranscriptItem[] {
  const items: TranscriptItem[] = [{ type: 'user', text: log.text }];
  for (const e of log.events) {
    switch (e.kind) {
      case 'tool_call':
        items.push({ type: 'tool_call', name: e.payload.toolName, argsJson: e.payload.argsJson });
        break;
      case 'tool_result':
        items.push({ type: 'tool_result', content: e.payload.content, isError: e.payload.isError });
        break;
      case 'approval_response':
        items.push({
          type: 'approval',
          toolName: e.payload.toolName,
          decision: approvalAnswerFromProto(e.payload).decision,
        });
        break;
      case 'question_request':
        items.push({ type: 'question', question: e.payload.question });
        break;
      case 'turn_complete':
        items.push({ type: 'assistant', text: e.payload.text });
        break;
      default:
        break;
    }
  }
  return items;
}

function responseOf(record: ModelCallRecord): ModelResponse {
  const content: OutputBlock[] = record.content.map((block): OutputBlock => {
    if (block.type === 'text') return block;
    let input: unknown;
    try {
      input = JSON.parse(block.argsJson);
    } catch {
      input = undefined;
    }
    // Arguments that are not an object cannot have been recorded by the machine; the
    // model_call comparison that follows reports the difference.
    return {
      type: 'tool_use',
      id: block.toolCallId,
      name: block.name,
      input: isJsonObject(input) ? input : {},
    };
  });
  return { model: record.model, content, stopReason: record.stopReason, usage: record.usage };
}

function stepJson(step: TurnStep): { kind: EventKind; json: string } {
  const proto = turnStepToProto(step, 0).step;
  switch (proto?.$case) {
    case 'modelCall':
      return {
        kind: 'model_call',
        json: canonicalJson(payloadCodecs.model_call.toJSON(proto.value)),
      };
    case 'toolCall':
      return {
        kind: 'tool_call',
        json: canonicalJson(payloadCodecs.tool_call.toJSON(proto.value)),
      };
    case 'toolResult':
      return {
        kind: 'tool_result',
        json: canonicalJson(payloadCodecs.tool_result.toJSON(proto.value)),
      };
    case 'agentConfig':
      return {
        kind: 'agent_config',
        json: canonicalJson(payloadCodecs.agent_config.toJSON(proto.value)),
      };
    case undefined:
      throw new AppError('internal', 'replay: the machine committed an empty step');
  }
}

function eventJson(event: Decoded): string {
  const codec = payloadCodecs[event.kind] as { toJSON(message: unknown): unknown };
  return canonicalJson(codec.toJSON(event.payload));
}

function describe(event: Decoded): string {
  return `${event.kind} ${eventJson(event)}`;
}

function describeEnd(effect: Extract<TurnEffect, { type: 'fail' | 'cancelled' }>): string {
  return effect.type === 'fail' ? effect.message : effect.reason;
}

function turnIdOf(event: Decoded): string | undefined {
  const payload: unknown = event.payload;
  if (typeof payload === 'object' && payload !== null && 'turnId' in payload) {
    const id = payload.turnId;
    return typeof id === 'string' && id !== '' ? id : undefined;
  }
  return undefined;
}

function decode(entry: ReplayEntry): Decoded {
  const kind = entry.kind as EventKind;
  try {
    return {
      position: entry.position,
      kind,
      payload: decodePayload(kind, entry.payload),
    } as Decoded;
  } catch (cause) {
    if (isAppError(cause)) throw cause;
    throw new AppError(
      'data_loss',
      `journal position ${entry.position} (${entry.kind}): the payload does not decode; verify the journal`,
      { cause },
    );
  }
}
