import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';

import { ApprovalDecision } from '../common/approval-bytes';
import { canonicalJson, isJsonObject } from '../common/canonical-json';
import { AppError } from '../common/errors';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../harness/crypto/node-ed25519';
import { requestIds } from '../common/request-ids';
import type { RecordedBlock } from '../harness/turn/turn-records';
import type { JournalReplay } from '../harness/turn/replay-verdict';
import { liveWhatIf, type LiveRun } from '../harness/turn/live';
import { whatIf, type WhatIfChange, type WhatIfReport } from '../harness/turn/what-if';
import { formatLiveLines, type LiveSetup } from './journal-live';
import { UsageError } from './cli-support';
import { WHAT_IF_FORMS } from './what-if-forms';
import { approvalKeyLine, loadVerifiedExport, type ApprovalKeyUse } from './journal-replay';

/**
 * `polychrome journal replay FILE --what-if CHANGE`: verify and read an export as replay
 * does, change one recorded step or configuration input, and report where the recorded run
 * no longer follows (harness/turn/what-if.ts). No model, no tool, nothing written.
 */

/** What a what-if run printed from. */
export interface WhatIfRun {
  readonly source: string;
  readonly partition: string;
  readonly spec: string;
  readonly approvalKey: ApprovalKeyUse;
  readonly report: WhatIfReport;
  /** With `--live`, the scratch run from the departure (none when the run still follows). */
  readonly live?: LiveRun;
}

/**
 * Parses a CHANGE (see {@link WHAT_IF_FORMS}).
 *
 * @throws UsageError naming what is wrong, with the forms.
 */
export async function parseWhatIf(spec: string): Promise<WhatIfChange> {
  const eq = spec.indexOf('=');
  if (eq <= 0) throw usage(spec, 'expected NAME=VALUE or NAME@TARGET=VALUE');
  const head = spec.slice(0, eq);
  const raw = spec.slice(eq + 1);
  const at = head.indexOf('@');
  const name = at < 0 ? head : head.slice(0, at);
  const target = at < 0 ? undefined : head.slice(at + 1);
  const value = raw.startsWith('@') ? await readValue(spec, raw.slice(1)) : raw;
  const needTarget = (): string => {
    if (target === undefined || target === '') throw usage(spec, `${name} needs @TARGET`);
    return target;
  };
  const noTarget = (): void => {
    if (target !== undefined) throw usage(spec, `${name} takes no @TARGET`);
  };
  switch (name) {
    case 'tool-result':
    case 'tool-error':
      return {
        kind: 'tool_result',
        position: position(spec, needTarget()),
        content: value,
        isError: name === 'tool-error',
      };
    case 'model-output':
      return {
        kind: 'model_output',
        position: position(spec, needTarget()),
        content: [{ type: 'text', text: value }],
      };
    case 'model-blocks':
      return {
        kind: 'model_output',
        position: position(spec, needTarget()),
        content: blocks(spec, value),
      };
    case 'summary':
      if (value === '') throw usage(spec, 'summary takes the text of the summary');
      return { kind: 'summary', position: position(spec, needTarget()), text: value };
    case 'approval': {
      const requestId = needTarget();
      if (value !== 'approve' && value !== 'deny')
        throw usage(spec, 'approval takes approve or deny');
      return {
        kind: 'approval',
        requestId,
        decision: value === 'approve' ? ApprovalDecision.Approved : ApprovalDecision.Denied,
      };
    }
    case 'handoff':
    case 'delegate': {
      const toolCallId = needTarget();
      if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/u.test(value)) {
        throw usage(spec, `${name} takes an agent name (a DNS label, such as billing)`);
      }
      return { kind: name, toolCallId, agent: value };
    }
    case 'max-steps': {
      noTarget();
      if (!/^[1-9][0-9]*$/u.test(value)) throw usage(spec, 'max-steps takes a whole number ≥ 1');
      return { kind: 'max_steps', value: Number(value) };
    }
    case 'system-prompt':
      noTarget();
      return { kind: 'system_prompt', value };
    case 'model':
      noTarget();
      if (value === '') throw usage(spec, 'model takes a model name');
      return { kind: 'model', value };
    default:
      throw usage(spec, `unknown change ${JSON.stringify(name)}`);
  }
}

/** A CHANGE as given and as {@link parseWhatIf} read it. */
export interface ParsedWhatIf {
  readonly spec: string;
  readonly change: WhatIfChange;
}

/**
 * Verifies the export at `path` (a failing one is refused, as by replay), then runs the
 * what-if of a CHANGE already parsed (so a usage error comes before any work); with
 * `live`, the scratch run from the departure too (harness/turn/live.ts). A throwaway key
 * re-signs the changed run's approval answers; it lives only in this process.
 */
export async function whatIfParsed(
  path: string,
  { spec, change }: ParsedWhatIf,
  pinnedKeys: readonly Uint8Array[],
  approvalPublicKey: Uint8Array | undefined,
  live?: LiveSetup,
): Promise<WhatIfRun> {
  const loaded = await loadVerifiedExport(path, pinnedKeys, approvalPublicKey);
  const options = {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    ...(loaded.approvalPublicKey === undefined
      ? {}
      : { approvalPublicKey: loaded.approvalPublicKey }),
    resigner: nodeEd25519Signer(randomBytes(32)),
  };
  const ran =
    live === undefined
      ? { report: whatIf(loaded.entries, change, options) }
      : await liveWhatIf(loaded.entries, change, { ...options, ...live });
  return {
    source: path,
    partition: loaded.verification.partition,
    spec,
    approvalKey: loaded.approvalKeyUse,
    ...ran,
  };
}

/** The human form. */
export function formatWhatIfText(run: WhatIfRun): string {
  const { report } = run;
  const out = [
    `what-if ${run.spec} on ${run.source} (${run.partition})`,
    `recorded run: OK, ${String(report.recorded.turns.length)} turns replayed`,
    approvalKeyLine(run.approvalKey),
    ...erasedLines(report.recorded.erased),
  ];
  const d = report.divergence;
  if (d === undefined) {
    out.push('the recorded run still follows under the change: it alters nothing recorded');
    return `${out.join('\n')}\n`;
  }
  out.push(
    `the recorded run no longer follows at turn ${d.turnId}, step ${String(d.step)}, position ${String(d.position)}`,
    `  what-if:  ${d.expected}`,
    `  recorded: ${d.found}`,
    report.needsModel
      ? '  from here the model would see a request the recording has no answer for; going on needs a live model'
      : '  the what-if line is what the turn machine itself would do next',
    'recorded after that point, in that turn:',
  );
  for (const outcome of report.recordedAfter) {
    out.push(
      outcome.type === 'tool_call'
        ? `  tool ${outcome.name} ${outcome.argsJson} (position ${String(outcome.position)})`
        : `  answer: ${outcome.text} (position ${String(outcome.position)})`,
    );
  }
  if (report.recordedAfter.length === 0) out.push('  (nothing)');
  if (run.live !== undefined) out.push(...formatLiveLines(run.live));
  return `${out.join('\n')}\n`;
}

/** The machine form: the same data. */
export function formatWhatIfJson(
  run: WhatIfRun,
  /** Fields a caller adds (`conversation replay`: the journal key it pinned). */
  extra: Readonly<Record<string, unknown>> = {},
): string {
  const { report } = run;
  return `${JSON.stringify({
    source: run.source,
    partition: run.partition,
    ...extra,
    change: report.change,
    approvalKey: run.approvalKey,
    follows: report.divergence === undefined,
    divergence: report.divergence ?? null,
    needsModel: report.needsModel,
    recordedAfter: report.recordedAfter,
    ...(run.live === undefined ? {} : { live: run.live }),
    erased: report.recorded.erased,
    turns: report.changed.turns.map((t) => ({
      turnId: t.turnId,
      ok: t.ok,
      ...(t.divergence === undefined ? {} : { divergence: t.divergence }),
      ...(t.unchecked === undefined ? {} : { unchecked: t.unchecked }),
    })),
  })}\n`;
}

/**
 * The erased positions (docs/replay.md, "Erased entries"): not checked in either run, and
 * not a change's to make.
 */
function erasedLines(erased: JournalReplay['erased']): string[] {
  if (erased.length === 0) return [];
  const listed = erased.map((e) => `${String(e.position)} (${e.kind})`).join(', ');
  return [
    `erased on request (an admin's erasure or a memory clear), cannot be checked in either run: ${listed}`,
  ];
}

function usage(spec: string, why: string): UsageError {
  return new UsageError(`--what-if ${spec}: ${why}\n  ${WHAT_IF_FORMS}`);
}

function position(spec: string, text: string): number {
  if (!/^(0|[1-9][0-9]*)$/u.test(text)) throw usage(spec, `${text} is not a journal position`);
  return Number(text);
}

async function readValue(spec: string, file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (cause) {
    throw new AppError('not_found', `--what-if ${spec}: cannot read ${file}`, { cause });
  }
}

function blocks(spec: string, json: string): RecordedBlock[] {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw usage(spec, 'model-blocks takes a JSON array of blocks');
  }
  if (!Array.isArray(value) || value.length === 0) {
    throw usage(spec, 'model-blocks takes a non-empty JSON array of blocks');
  }
  return value.map((block: unknown, i): RecordedBlock => {
    if (isJsonObject(block) && block.type === 'text' && typeof block.text === 'string') {
      return { type: 'text', text: block.text };
    }
    if (
      isJsonObject(block) &&
      block.type === 'tool_use' &&
      typeof block.id === 'string' &&
      block.id !== '' &&
      typeof block.name === 'string' &&
      isJsonObject(block.input)
    ) {
      return {
        type: 'tool_use',
        toolCallId: block.id,
        name: block.name,
        argsJson: canonicalJson(block.input),
      };
    }
    throw usage(
      spec,
      `block ${String(i)} is neither {"type":"text","text":...} nor {"type":"tool_use","id":...,"name":...,"input":{...}}`,
    );
  });
}
