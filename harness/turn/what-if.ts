import { AppError } from '../../common/errors';
import type { ApprovalDecision } from '../../common/approval-bytes';
import { decodePayload, encodePayload, type EventKind } from '../../common/event-kinds';
import { approvalAnswerFromProto, approvalAnswerToProto } from './request-codec';
import { modelCallFromProto, modelCallToProto } from './step-codec';
import {
  createPrefixRequestHasher,
  decodeAgentConfig,
  encodeAgentConfig,
  hex,
  type AgentConfig,
} from './agent-config';
import { signApproval, type ApprovalSigner } from './approval-token';
import { erasuresOf, type ReplayEntry } from './journal-turns';
import { replayJournal } from './replay';
import { type ReplayOptions } from './replay-options';
import { type Divergence, type JournalReplay } from './replay-verdict';
import {
  checkDelegateTarget,
  recordedAgents,
  retargeted,
  type TargetChange,
} from './what-if-targets';
import type { RecordedBlock } from './turn-records';

/**
 * What-if (docs/replay.md, "What-if"): one recorded step or one configuration input is
 * changed, and the journal is replayed through the same machine as replay, to find the
 * first step where the recorded run no longer follows. Nothing is written anywhere and no
 * model or tool is called: the report says what the machine wanted at that point, and what
 * the recorded run did after it. Pure: the journal comes in, the report goes out.
 */

/** One change to a recorded run. */
export type WhatIfChange =
  /** The tool result at a journal position has other content. */
  | {
      readonly kind: 'tool_result';
      readonly position: number;
      readonly content: string;
      readonly isError: boolean;
    }
  /** The model answered otherwise at a journal position (a `model_call`). */
  | { readonly kind: 'model_output'; readonly position: number; readonly content: RecordedBlock[] }
  /** An approval request was answered the other way. */
  | { readonly kind: 'approval'; readonly requestId: string; readonly decision: ApprovalDecision }
  /** Every recorded configuration had this step budget. */
  | { readonly kind: 'max_steps'; readonly value: number }
  /** Every recorded configuration had this system prompt. */
  | { readonly kind: 'system_prompt'; readonly value: string }
  /** Every recorded configuration named this model. */
  | { readonly kind: 'model'; readonly value: string }
  /**
   * The `summary` at a journal position has this text: every attempt given that summary
   * gets it in its system prompt (docs/replay.md, "Summaries").
   */
  | { readonly kind: 'summary'; readonly position: number; readonly text: string }
  /**
   * The `__handoff_to` call `toolCallId` named agent `agent` (docs/turns.md, "Handoffs"):
   * the machine decides it again, and may hand off to any agent whose configuration the
   * journal records.
   */
  | { readonly kind: 'handoff'; readonly toolCallId: string; readonly agent: string }
  /**
   * The `__delegate_to` call `toolCallId` (one of a panel's, or alone) asked agent `agent`
   * (docs/turns.md, "Delegation"): the machine decides the delegation again, and may
   * start the thread under any agent the asking agent may delegate to whose configuration
   * the journal records.
   */
  | { readonly kind: 'delegate'; readonly toolCallId: string; readonly agent: string };

/** What a what-if run needs besides replay's own options. */
export interface WhatIfOptions extends ReplayOptions {
  /**
   * Re-signs the approval answers of the changed journal: a changed decision no longer
   * carries the control plane's signature, so the what-if run verifies every answer with
   * this throwaway key instead (the unchanged journal is checked with the real one).
   */
  readonly resigner: ApprovalSigner;
}

/** A recorded tool call or answer after the divergence. */
export type RecordedOutcome =
  | {
      readonly type: 'tool_call';
      readonly position: number;
      readonly name: string;
      readonly argsJson: string;
    }
  | { readonly type: 'answer'; readonly position: number; readonly text: string };

/** The result of {@link whatIf}. */
export interface WhatIfReport {
  readonly change: WhatIfChange;
  /** The recorded run, unchanged: it must replay ok for the comparison to mean anything. */
  readonly recorded: JournalReplay;
  /** The changed run. */
  readonly changed: JournalReplay;
  /** The first step where the recorded run no longer follows the change; none: it still does. */
  readonly divergence?: Divergence;
  /** What the recorded run did from the divergence on, in that turn. */
  readonly recordedAfter: readonly RecordedOutcome[];
  /**
   * True when going on from the divergence needs a live model (the machine built a request
   * the recording has no answer for); false when the machine's next effect is its own.
   */
  readonly needsModel: boolean;
}

/**
 * Applies `change` to `entries` and replays both.
 *
 * @throws AppError `invalid_argument` when the change names a position or request the
 *   journal does not hold, or a value the configuration cannot take; `failed_precondition`
 *   when the recorded run does not replay ok (what-if compares against it).
 */
export function whatIf(
  entries: readonly ReplayEntry[],
  change: WhatIfChange,
  options: WhatIfOptions,
): WhatIfReport {
  // Only the changed run's attempts are told (the one `--live` continues).
  const { onAttempt, ...recordedOptions } = options;
  const recorded = replayJournal(entries, recordedOptions);
  if (!recorded.ok) {
    const d = recorded.divergence;
    throw new AppError(
      'failed_precondition',
      `the recorded run does not replay${d === undefined ? '' : ` (turn ${d.turnId}, position ${String(d.position)})`}; a what-if needs one that does: run replay first`,
    );
  }
  if (change.kind === 'delegate') checkDelegateTarget(entries, change);
  const rewritten = applyChange(entries, change, options.resigner);
  const inner = createPrefixRequestHasher();
  const changed = replayJournal(rewritten.entries, {
    ...recordedOptions,
    ...(isTargetChange(change) ? { otherAgents: recordedAgents(entries) } : {}),
    ...(onAttempt === undefined ? {} : { onAttempt }),
    approvalPublicKey: options.resigner.publicKey,
    // A request digest binds the configuration's digest. A change to the configuration
    // must show where behaviour departs, not that the digest did, so requests are hashed
    // under the digest the recorded calls name. Not for the model: its name and
    // parameters reach the request only through that digest, and another model is
    // another answer from the first call on.
    requestHasher:
      change.kind === 'model'
        ? inner
        : (request, configSha256) =>
            inner(request, rewritten.originalDigest.get(hex(configSha256)) ?? configSha256),
  });
  const divergence = changed.divergence;
  return {
    change,
    recorded,
    changed,
    ...(divergence === undefined ? {} : { divergence }),
    recordedAfter: divergence === undefined ? [] : outcomesAfter(entries, divergence),
    needsModel: divergence?.expected.startsWith('model_call whose request_sha256') ?? false,
  };
}

interface Rewritten {
  readonly entries: ReplayEntry[];
  /** New configuration digest (hex) to the recorded one. */
  readonly originalDigest: ReadonlyMap<string, Uint8Array>;
}

function applyChange(
  entries: readonly ReplayEntry[],
  change: WhatIfChange,
  resigner: ApprovalSigner,
): Rewritten {
  const originalDigest = new Map<string, Uint8Array>();
  const configChange = configEdit(change);
  let touched = configChange !== undefined;
  /** Recorded configuration digest (hex) to the changed one. */
  const newDigest = new Map<string, Uint8Array>();
  const out = entries.map((entry): ReplayEntry => {
    if (entry.kind === 'agent_config' && configChange !== undefined) {
      const payload = decodePayload('agent_config', entry.payload);
      const edited = encodeAgentConfig(configChange(decodeAgentConfig(payload.configJson).config));
      originalDigest.set(hex(edited.sha256), payload.sha256);
      newDigest.set(hex(payload.sha256), edited.sha256);
      return reencode(entry, 'agent_config', {
        ...payload,
        sha256: Buffer.from(edited.sha256),
        configJson: edited.json,
      });
    }
    if (entry.kind === 'model_call') {
      const payload = decodePayload('model_call', entry.payload);
      const digest = newDigest.get(hex(payload.configSha256));
      let record = modelCallFromProto(payload);
      if (change.kind === 'model_output' && change.position === entry.position) {
        touched = true;
        record = {
          ...record,
          content: change.content,
          stopReason: change.content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
        };
      }
      if (isTargetChange(change)) {
        const content = retargeted(record.content, change);
        if (content !== record.content) touched = true;
        record = { ...record, content };
      }
      if (digest !== undefined) record = { ...record, configSha256: digest };
      return reencode(entry, 'model_call', modelCallToProto(record));
    }
    if (
      entry.kind === 'summary' &&
      change.kind === 'summary' &&
      change.position === entry.position
    ) {
      touched = true;
      const payload = decodePayload('summary', entry.payload);
      return reencode(entry, 'summary', { ...payload, text: change.text });
    }
    if (
      entry.kind === 'tool_result' &&
      change.kind === 'tool_result' &&
      change.position === entry.position
    ) {
      touched = true;
      const payload = decodePayload('tool_result', entry.payload);
      return reencode(entry, 'tool_result', {
        ...payload,
        content: change.content,
        isError: change.isError,
      });
    }
    if (entry.kind === 'approval_response') {
      const answer = approvalAnswerFromProto(decodePayload('approval_response', entry.payload));
      const flip = change.kind === 'approval' && change.requestId === answer.requestId;
      if (flip) touched = true;
      const decision = flip ? change.decision : answer.decision;
      const signed = signApproval({ ...answer, decision }, resigner);
      return reencode(
        entry,
        'approval_response',
        approvalAnswerToProto({
          ...answer,
          decision,
          ...signed,
          ...(flip ? { answeredBy: 'what-if', comment: 'changed by what-if' } : {}),
        }),
      );
    }
    return entry;
  });
  if (!touched) throw new AppError('invalid_argument', notFound(change, entries));
  return { entries: out, originalDigest };
}

/** The edit a configuration change makes, or undefined for a change to a step. */
function configEdit(change: WhatIfChange): ((config: AgentConfig) => AgentConfig) | undefined {
  switch (change.kind) {
    case 'max_steps':
      if (!Number.isInteger(change.value) || change.value < 1) {
        throw new AppError(
          'invalid_argument',
          `max-steps ${String(change.value)} is not a positive whole number of steps`,
        );
      }
      return (config) => ({ ...config, budget: { deployment: change.value } });
    case 'system_prompt':
      return (config) => ({ ...config, system: change.value });
    case 'model':
      if (change.value === '') {
        throw new AppError(
          'invalid_argument',
          'model: name a model, for example claude-sonnet-4-5',
        );
      }
      return (config) => ({ ...config, model: { ...config.model, model: change.value } });
    default:
      return undefined;
  }
}

function notFound(change: WhatIfChange, entries: readonly ReplayEntry[]): string {
  switch (change.kind) {
    case 'tool_result':
    case 'model_output':
    case 'summary': {
      const kind = change.kind === 'model_output' ? 'model_call' : change.kind;
      const erased = erasuresOf(entries).get(change.position);
      if (erased !== undefined) {
        return `position ${String(change.position)} (a ${erased.kind}) was erased on request (an admin's erasure or a memory clear): its content is gone, so a what-if cannot change it`;
      }
      const at = entries.find((e) => e.position === change.position);
      const positions = entries.filter((e) => e.kind === kind).map((e) => e.position);
      return `position ${String(change.position)} is ${at === undefined ? 'not in the journal' : `a ${at.kind}`}, not a ${kind}; the journal's ${kind} positions are ${positions.length === 0 ? '(none)' : positions.join(', ')}`;
    }
    case 'approval':
      return `no approval answer has request id ${change.requestId}; see the approval lines of replay's transcript`;
    case 'handoff':
      return `no model call asks __handoff_to with tool call id ${change.toolCallId}; see the agent_handoff and tool_result lines of replay's transcript`;
    case 'delegate':
      return `no model call asks __delegate_to with tool call id ${change.toolCallId}; see the thread lines of replay's transcript (a thread's id is the id of the call that opened it)`;
    default:
      return 'the journal records no agent configuration (it was written before configurations were recorded), so a configuration cannot be changed';
  }
}

/** True for a change of the agent a `__handoff_to` or `__delegate_to` call names. */
function isTargetChange(change: WhatIfChange): change is TargetChange & WhatIfChange {
  return change.kind === 'handoff' || change.kind === 'delegate';
}

function reencode<K extends EventKind>(
  entry: ReplayEntry,
  kind: K,
  payload: Parameters<typeof encodePayload<K>>[1],
): ReplayEntry {
  return { ...entry, payload: encodePayload(kind, payload) };
}

/** The recorded tool calls and answer of the divergent turn from the divergence on. */
function outcomesAfter(entries: readonly ReplayEntry[], divergence: Divergence): RecordedOutcome[] {
  const out: RecordedOutcome[] = [];
  for (const entry of entries) {
    if (entry.position < divergence.position) continue;
    if (entry.kind === 'tool_call') {
      const call = decodePayload('tool_call', entry.payload);
      if (call.turnId !== divergence.turnId) continue;
      out.push({
        type: 'tool_call',
        position: entry.position,
        name: call.toolName,
        argsJson: call.argsJson,
      });
    }
    if (entry.kind === 'turn_complete') {
      const done = decodePayload('turn_complete', entry.payload);
      if (done.turnId !== divergence.turnId) continue;
      out.push({ type: 'answer', position: entry.position, text: done.text });
    }
  }
  return out;
}
