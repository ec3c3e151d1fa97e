import { readFile } from 'node:fs/promises';

import { approvalKeyId } from '../common/approval-bytes';
import { AppError } from '../common/errors';
import { nodeEd25519Verifier } from '../harness/crypto/node-ed25519';
import { requestIds } from '../common/request-ids';
import { type ReplayEntry } from '../harness/turn/journal-turns';
import { replayJournal } from '../harness/turn/replay';
import { type JournalReplay, type TranscriptItem } from '../harness/turn/replay-verdict';
import { SummaryStatus, type SummaryReplay } from '../harness/turn/replay-summaries';
import type { ExportHeader } from '../common/journal-export-format';
import type { PaymentAudit } from '../common/payment-audit';
import { findingLine } from '../common/payment-rows';
import { parseExportEvent, parseExportHeader } from '../common/journal-export-parse';
import { verifyExportFile, type OfflineVerification } from './journal-verify';

/**
 * `polychrome journal replay FILE`: verify an export offline with the existing verifier,
 * refuse one that fails, then replay every turn through the real turn machine
 * (harness/turn/replay.ts). No server, no model, no tool: a third party can run it.
 */

/** Where the approval key replay checked approval answers with came from. */
export const ApprovalKeySource = {
  /** `--approval-key`: the user's own word. */
  Pinned: 'pinned',
  /** The export header's `approvalPublicKey`, used because nothing was pinned. */
  ExportHeader: 'export-header',
  /** No key: the journal holds no approval answer, so none was needed. */
  None: 'none',
} as const;
export type ApprovalKeySource = (typeof ApprovalKeySource)[keyof typeof ApprovalKeySource];

/** Which approval key a run used, and what the export header said. */
export interface ApprovalKeyUse {
  readonly source: ApprovalKeySource;
  /** The key id of the key used (common/approval-bytes.ts), or null for none. */
  readonly keyId: string | null;
  /** The key id the export header names, or null when it names none. */
  readonly headerKeyId: string | null;
  /** A key was pinned and the header names another one: the pinned one was used. */
  readonly mismatch: boolean;
}

/** What a replay run printed from, for text and JSON output alike. */
export interface ReplayReport {
  readonly source: string;
  readonly partition: string;
  readonly verification: OfflineVerification;
  readonly approvalKey: ApprovalKeyUse;
  readonly replay: JournalReplay;
}

/**
 * Verifies and replays the export at `path`.
 *
 * @param approvalPublicKey raw 32-byte approval key, pinned; it wins over the header's.
 *   Absent: the header's `approvalPublicKey`, if it has one (the trust rule of
 *   `--public-key`: the header is trusted only when nothing is pinned).
 * @throws AppError `failed_precondition` when the export fails verification (replay is
 *   refused); `invalid_argument` when the journal holds approval answers and no approval
 *   key is known; `not_found` / `invalid_argument` from the verifier for an unreadable file.
 */
export async function replayExportFile(
  path: string,
  pinnedKeys: readonly Uint8Array[],
  approvalPublicKey: Uint8Array | undefined,
): Promise<ReplayReport> {
  const loaded = await loadVerifiedExport(path, pinnedKeys, approvalPublicKey);
  const replay = replayJournal(loaded.entries, {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    ...(loaded.approvalPublicKey === undefined
      ? {}
      : { approvalPublicKey: loaded.approvalPublicKey }),
  });
  return {
    source: path,
    partition: loaded.verification.partition,
    verification: loaded.verification,
    approvalKey: loaded.approvalKeyUse,
    replay,
  };
}

/** An export that verified, read for replay. */
export interface VerifiedExport {
  readonly verification: OfflineVerification;
  readonly entries: readonly ReplayEntry[];
  /** The key to check approval answers with: the one passed, else the header's. */
  readonly approvalPublicKey: Uint8Array | undefined;
  readonly approvalKeyUse: ApprovalKeyUse;
}

/**
 * Verifies the export at `path` and reads its events, as replay and what-if take them.
 *
 * @throws AppError as {@link replayExportFile}.
 */
export async function loadVerifiedExport(
  path: string,
  pinnedKeys: readonly Uint8Array[],
  approvalPublicKey: Uint8Array | undefined,
): Promise<VerifiedExport> {
  const verification = await verifyExportFile(path, pinnedKeys);
  if (!verification.ok || verification.unsealed > 0) {
    const at = verification.failure;
    throw new AppError(
      'failed_precondition',
      at === undefined
        ? `${path}: ${String(verification.unsealed)} events are not covered by a signed root; replay is refused until the export verifies (polychrome journal verify)`
        : `${path}: verification failed at position ${String(at.position)} (${at.reason}): ${at.message}; replay is refused until the export verifies (polychrome journal verify)`,
      { details: { file: path } },
    );
  }
  const text = await readFile(path, 'utf8');
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  const [first = '', ...rest] = lines;
  const header = parseExportHeader(first);
  if (typeof header === 'string') throw new AppError('invalid_argument', `${path}: ${header}`);
  const entries: ReplayEntry[] = [];
  for (const line of rest) {
    const event = parseExportEvent(line);
    // Verified above, so every line reads; a file changed since then is refused.
    if (typeof event === 'string') {
      throw new AppError('failed_precondition', `${path} changed while it was read: ${event}`);
    }
    entries.push(event);
  }
  const use = approvalKeyUse(approvalPublicKey, header);
  const key = approvalPublicKey ?? header.approvalKey?.publicKey;
  if (key === undefined && entries.some((e) => e.kind === 'approval_response')) {
    throw new AppError(
      'invalid_argument',
      `${path} holds approval answers, and replay needs the control plane's approval public key to check them: pass --approval-key KEY (docs/replay.md)`,
      { details: { file: path } },
    );
  }
  return { verification, entries, approvalPublicKey: key, approvalKeyUse: use };
}

function approvalKeyUse(pinned: Uint8Array | undefined, header: ExportHeader): ApprovalKeyUse {
  const headerKeyId = header.approvalKey?.keyId ?? null;
  if (pinned !== undefined) {
    const keyId = approvalKeyId(pinned);
    return {
      source: ApprovalKeySource.Pinned,
      keyId,
      headerKeyId,
      mismatch: headerKeyId !== null && headerKeyId !== keyId,
    };
  }
  return {
    source: headerKeyId === null ? ApprovalKeySource.None : ApprovalKeySource.ExportHeader,
    keyId: headerKeyId,
    headerKeyId,
    mismatch: false,
  };
}

/** One line saying which approval key was used and how far it is trusted. */
export function approvalKeyLine(use: ApprovalKeyUse): string {
  switch (use.source) {
    case ApprovalKeySource.None:
      return 'approval key: none given and none in the export header';
    case ApprovalKeySource.ExportHeader:
      return `approval key: ${String(use.keyId)}, from the export header (trusted because no --approval-key was pinned; the header is not signed: pin the key for authenticity)`;
    case ApprovalKeySource.Pinned:
      if (!use.mismatch) {
        return `approval key: ${String(use.keyId)}, pinned with --approval-key${use.headerKeyId === null ? '' : ' (the export header names the same key)'}`;
      }
      return (
        `approval key: ${String(use.keyId)}, pinned with --approval-key, used; ` +
        `MISMATCH: the export header names another key, ${String(use.headerKeyId)}, so approvals signed by it do not verify here`
      );
  }
}

/** Why a turn was replayed in the weak mode, as the verdict says it. */
function weakWhy(turn: ReplayReport['replay']['turns'][number]): string {
  if (turn.mode !== 'weak') return '';
  if (turn.erasedMemoryBy !== undefined) {
    return `: the memory it started from was erased by the memory clear at ${String(turn.erasedMemoryBy)}, so its requests are not checked`;
  }
  return ': recorded before configurations were, so requests and budgets are not checked';
}

/** The human form: the reconstructed transcript and a verdict per turn. */
export function formatReplayText(report: ReplayReport): string {
  const { replay } = report;
  const out: string[] = [];
  for (const turn of replay.turns) {
    const unchecked = turn.unchecked ?? [];
    const verdict =
      (turn.ok ? `ok (${turn.mode}${weakWhy(turn)})` : 'DIVERGED') +
      (unchecked.length === 0
        ? ''
        : `, ${String(unchecked.length)} step(s) not checkable because entries were erased`);
    out.push(
      `turn ${turn.turnId} at ${String(turn.position)}: ${turn.status}, ${String(turn.attempts)} attempt(s), ${verdict}`,
    );
    for (const item of turn.transcript) out.push(`  ${transcriptLine(item)}`);
    if (turn.note !== undefined) out.push(`  quarantined: ${turn.note}`);
    for (const r of turn.resolutions ?? []) {
      out.push(
        `  resolved at ${String(r.position)} by ${r.actor} (as ${r.caller}): tool call ${r.toolCallId || '(none)'} ` +
          (r.decision === 'did_not_run'
            ? 'did not run; the turn runs it again'
            : `ran${r.resultUnknown ? ', result unknown' : ', result recorded'}`),
      );
    }
    for (const u of unchecked) {
      out.push(
        `  not checkable because of erased position ${String(u.erasedPosition)}: position ${String(u.position)}, ${u.what}`,
      );
    }
    const d = turn.divergence;
    if (d !== undefined) {
      out.push(`  first divergence at step ${String(d.step)}, position ${String(d.position)}`);
      out.push(`    expected: ${d.expected}`);
      out.push(`    found:    ${d.found}`);
    }
  }
  for (const erased of replay.erased) {
    out.push(
      `position ${String(erased.position)} (${erased.kind}${erased.turnId === '' ? '' : ` of turn ${erased.turnId}`}): erased on request (an admin's erasure or a memory clear), cannot be checked`,
    );
  }
  for (const skipped of replay.skipped) {
    out.push(`position ${String(skipped.position)} (${skipped.kind}): skipped`);
  }
  out.push(...summaryLines(replay.summaries));
  out.push(...paymentFindingLines(replay.payments));
  const diverged = replay.turns.filter((t) => !t.ok).length;
  const badSummaries = replay.summaries.filter((s) => s.status === SummaryStatus.Diverged).length;
  out.push(approvalKeyLine(report.approvalKey));
  out.push(
    `${report.source} (${report.partition}): ${replay.ok ? 'OK' : 'DIVERGED'}: ${String(replay.turns.length)} turns replayed from ${String(replay.events)} events, ${String(diverged)} diverged` +
      (replay.summaries.length === 0
        ? ''
        : `; ${String(replay.summaries.length)} summaries checked, ${String(badSummaries)} do not follow`) +
      (replay.payments.payments.length === 0 && replay.payments.findings.length === 0
        ? ''
        : `; ${String(replay.payments.payments.length)} payments audited, ${String(replay.payments.findings.length)} problems`),
  );
  return `${out.join('\n')}\n`;
}

/** The machine form: the same data. */
export function formatReplayJson(
  report: ReplayReport,
  /** Fields a caller adds (`conversation replay`: the journal key it pinned). */
  extra: Readonly<Record<string, unknown>> = {},
): string {
  return `${JSON.stringify({
    source: report.source,
    partition: report.partition,
    ...extra,
    ok: report.replay.ok,
    approvalKey: report.approvalKey,
    events: report.replay.events,
    turns: report.replay.turns,
    skipped: report.replay.skipped,
    erased: report.replay.erased,
    summaries: report.replay.summaries,
    payments: report.replay.payments,
    divergence: report.replay.divergence ?? null,
  })}\n`;
}

/** One line per payment finding (docs/payments.md, "Auditing payments"). */
export function paymentFindingLines(audit: PaymentAudit): string[] {
  return audit.findings.map(findingLine);
}

/** One line per `summary` event: what it covers and its verdict (docs/replay.md, "Summaries"). */
function summaryLines(summaries: readonly SummaryReplay[]): string[] {
  return summaries.map((s) => {
    const at = `summary at ${String(s.position)}`;
    if (s.status === SummaryStatus.Erased) return `${at}: erased, skipped (${s.problem ?? ''})`;
    const covers = `covers ${String(s.fromPosition)}..${String(s.toPosition)}${s.previousPosition === 0 ? '' : `, extends ${String(s.previousPosition)}`}, adds ${String(s.turns.length)} turn(s)`;
    switch (s.status) {
      case SummaryStatus.Ok:
        return `${at}: ${covers}, ok`;
      case SummaryStatus.Unchecked:
        return `${at}: ${covers}, ${s.problem ?? 'cannot be checked'}`;
      default:
        return `${at}: ${covers}, DIVERGED: ${s.problem ?? ''}`;
    }
  });
}

function transcriptLine(item: TranscriptItem): string {
  switch (item.type) {
    case 'user':
      return `user: ${item.text}`;
    case 'assistant':
      return `assistant: ${item.text}`;
    case 'tool_call':
      return `tool ${item.name} ${item.argsJson}`;
    case 'tool_result':
      return `  -> ${item.isError ? 'error: ' : ''}${item.content}`;
    case 'approval':
      return `approval: ${item.toolName} ${item.decision}`;
    case 'question':
      return `question: ${item.question}`;
  }
}
