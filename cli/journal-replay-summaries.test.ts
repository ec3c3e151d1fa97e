/**
 * The CLI's side of summaries (docs/replay.md, "Summaries"): the `summary@POS=TEXT` what-if
 * change as the command line reads it, and the lines and JSON replay prints for summaries
 * and for attempts that cannot be checked, over a journal the real turn machine wrote.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { requestIds } from '../common/request-ids';
import { nodeEd25519Verifier } from '../harness/crypto/node-ed25519';
import { replayJournal } from '../harness/turn/replay';
import { MachineJournal } from '../test/support/machine-journal';
import { UsageError } from './cli-support';
import {
  ApprovalKeySource,
  formatReplayJson,
  formatReplayText,
  type ReplayReport,
} from './journal-replay';
import type { OfflineVerification } from './journal-verify';
import { parseWhatIf } from './journal-what-if';

function reportOf(j: MachineJournal): ReplayReport {
  return {
    source: 'export.ndjson',
    partition: 'conv-1',
    // Not read by the formatters beyond the partition above.
    verification: {} as OfflineVerification,
    approvalKey: {
      source: ApprovalKeySource.None,
      keyId: null,
      headerKeyId: null,
      mismatch: false,
    },
    replay: replayJournal(j.entries, { ids: requestIds, verifier: nodeEd25519Verifier }),
  };
}

describe('--what-if summary@POS=TEXT', () => {
  it('reads the position and the text, or the text from @FILE', async () => {
    expect(await parseWhatIf('summary@12=The user is Bob.')).toEqual({
      kind: 'summary',
      position: 12,
      text: 'The user is Bob.',
    });
    const dir = await mkdtemp(join(tmpdir(), 'summary-what-if-'));
    await writeFile(join(dir, 'summary.txt'), 'from a file\nsecond line');
    expect(await parseWhatIf(`summary@3=@${join(dir, 'summary.txt')}`)).toEqual({
      kind: 'summary',
      position: 3,
      text: 'from a file\nsecond line',
    });
  });

  it('refuses a change without a position, with a bad one, or with no text', async () => {
    await expect(parseWhatIf('summary=text')).rejects.toThrow(UsageError);
    await expect(parseWhatIf('summary=text')).rejects.toThrow('summary needs @TARGET');
    await expect(parseWhatIf('summary@x=text')).rejects.toThrow('x is not a journal position');
    await expect(parseWhatIf('summary@4=')).rejects.toThrow('summary takes the text');
  });
});

describe('replay output with summaries', () => {
  it('prints a line per summary and counts them; JSON carries them', () => {
    const j = new MachineJournal();
    const t1 = j.turn('my name is Ada');
    const t2 = j.turn('I live in Lyon');
    const s = j.summary({ turns: [t1], text: 'Ada.' });
    j.turn('who am I?', { historyFrom: t2, summaryPosition: s });
    const report = reportOf(j);
    const text = formatReplayText(report);
    expect(text).toContain(`summary at ${String(s)}: covers 0..0, adds 1 turn(s), ok\n`);
    expect(text).toContain(': OK: 3 turns replayed from');
    expect(text).toContain('; 1 summaries checked, 0 do not follow\n');
    const json = JSON.parse(formatReplayJson(report)) as { summaries: unknown[] };
    expect(json.summaries).toEqual([expect.objectContaining({ position: s, status: 'ok' })]);
  });

  it('says which summary does not follow, and which attempt cannot be checked', () => {
    const j = new MachineJournal();
    const t1 = j.turn('my name is Ada');
    const t2 = j.turn('I live in Lyon');
    const s1 = j.summary({ turns: [t1], text: 'Ada.' });
    j.turn('who am I?', { historyFrom: t2, summaryPosition: s1 });
    // Claims to extend nothing, though a summary stood before it.
    const s2 = j.summary({ turns: [t2], text: 'Lyon.' });
    j.erase(s1);
    const text = formatReplayText(reportOf(j));
    expect(text).toContain(`summary at ${String(s1)}: erased, skipped`);
    expect(text).toContain(
      `summary at ${String(s2)}: covers ${String(t2)}..${String(t2)}, adds 0 turn(s), DIVERGED: it extends no summary (previous_position 0), but the summary at position ${String(s1)} stood before it`,
    );
    expect(text).toMatch(
      new RegExp(
        `not checkable because of erased position ${String(s1)}: position \\d+, the attempt was given the summary at position ${String(s1)}, erased since`,
        'u',
      ),
    );
    expect(text).toContain(': DIVERGED: 3 turns replayed from');
    expect(text).toContain('; 2 summaries checked, 1 do not follow\n');
  });
});

describe.each(['handoff', 'delegate'] as const)('--what-if %s@TOOL-CALL-ID=AGENT', (kind) => {
  it('reads the tool call id and the agent', async () => {
    expect(await parseWhatIf(`${kind}@toolu_7=billing`)).toEqual({
      kind,
      toolCallId: 'toolu_7',
      agent: 'billing',
    });
  });

  it('refuses a change without a call id or with something that is not an agent name', async () => {
    await expect(parseWhatIf(`${kind}=billing`)).rejects.toThrow(`${kind} needs @TARGET`);
    await expect(parseWhatIf(`${kind}@toolu_7=Billing Team`)).rejects.toThrow(
      `${kind} takes an agent name`,
    );
  });
});
