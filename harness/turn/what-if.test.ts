/**
 * What-if against a journal the real stack wrote (test/support/real-turns.ts: the real
 * coordinator, the real harness over gRPC with the scripted model, the real journal store),
 * the same journal replay.test.ts replays. Nothing calls a model or a tool, and nothing is
 * written.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import { isAppError } from '../../common/errors';
import type { JournalEntry } from '../../common/state-journal';
import { recordApprovedTurns, type RealTurns } from '../../test/support/real-turns';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { decodeAgentConfig } from './agent-config';
import { requestIds } from '../../common/request-ids';
import { effectiveMaxSteps } from './step-budget';
import { whatIf, type WhatIfChange, type WhatIfReport } from './what-if';

let turns: RealTurns;
let entries: JournalEntry[];
let partition = '';
let requestId = '';

beforeAll(async () => {
  ({ turns, entries, partition, requestId } = await recordApprovedTurns(pino({ level: 'silent' })));
}, 60_000);

afterAll(async () => {
  await turns.close();
});

function run(change: WhatIfChange, journal: readonly JournalEntry[] = entries): WhatIfReport {
  return whatIf(journal, change, {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: turns.approvals.publicKey,
    resigner: nodeEd25519Signer(randomBytes(32)),
  });
}

const positionOf = (kind: string, skip = 0): number =>
  entries.filter((e) => e.kind === kind)[skip]?.position ?? -1;

const firstTurn = (): string =>
  decodePayload(
    'message_received',
    entries.find((e) => e.kind === 'message_received')?.payload ?? new Uint8Array(),
  ).turnId;

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('whatIf on a journal the real stack wrote', () => {
  it('a different tool result: the next model call no longer follows, and needs a model', async () => {
    const report = run({
      kind: 'tool_result',
      position: positionOf('tool_result'),
      content: '41',
      isError: false,
    });
    expect(report.recorded.ok).toBe(true);
    expect(report.divergence).toMatchObject({ turnId: firstTurn(), step: 2 });
    expect(report.needsModel).toBe(true);
    expect(report.recordedAfter).toEqual([
      { type: 'answer', position: positionOf('turn_complete'), text: 'It is 42.' },
    ]);
    // Only the first turn depends on the change.
    expect(report.changed.turns.map((t) => t.ok)).toEqual([false, true]);
    expect(await turns.journal.entries(partition)).toHaveLength(entries.length);
    expect(turns.harness.model.callCount).toBe(3);
  });

  it('a denial instead of the approval: the machine reports the denied result, and the recorded call follows', () => {
    const report = run({ kind: 'approval', requestId, decision: 'denied' });
    // The resumed attempt is inside the first call's round trip.
    expect(report.divergence).toMatchObject({ turnId: firstTurn(), step: 1 });
    expect(report.divergence?.expected).toMatch(/^tool_result .*denied/i);
    expect(report.divergence?.found).toMatch(/^tool_call /);
    expect(report.needsModel).toBe(false);
    expect(report.recordedAfter.map((o) => o.type)).toEqual(['tool_call', 'answer']);
    expect(report.recordedAfter[0]).toMatchObject({
      name: 'calculator',
      argsJson: '{"expression":"6 * 7"}',
    });
  });

  it('the same approval decision changes nothing: every answer is re-signed and checked', () => {
    const report = run({ kind: 'approval', requestId, decision: 'approved' });
    expect(report.divergence).toBeUndefined();
    expect(report.changed.ok).toBe(true);
  });

  it('a step budget equal to the recorded one changes nothing; the configuration digest is not the behaviour', () => {
    const config = entries.find((e) => e.kind === 'agent_config');
    const recorded = decodeAgentConfig(
      decodePayload('agent_config', config?.payload ?? new Uint8Array()).configJson,
    );
    const same = run({ kind: 'max_steps', value: effectiveMaxSteps(recorded.config.budget) });
    expect(same.divergence).toBeUndefined();
    expect(same.changed.ok).toBe(true);
  });

  it('a step budget of one: the second call becomes the closing call, whose request differs', () => {
    const report = run({ kind: 'max_steps', value: 1 });
    expect(report.divergence).toMatchObject({ turnId: firstTurn(), step: 2 });
    expect(report.needsModel).toBe(true);
  });

  it.each([
    ['system prompt', { kind: 'system_prompt', value: 'Answer in French.' }],
    ['model', { kind: 'model', value: 'another-model' }],
  ] as const)('a different %s: the first model call no longer follows', (_name, change) => {
    const report = run(change);
    expect(report.divergence).toMatchObject({ turnId: firstTurn(), step: 1 });
    expect(report.divergence?.position).toBe(positionOf('model_call'));
    expect(report.needsModel).toBe(true);
  });

  it('a different model output: the machine would have answered it, the recorded answer differs', () => {
    const report = run({
      kind: 'model_output',
      position: positionOf('model_call', 1),
      content: [{ type: 'text', text: 'It is 43.' }],
    });
    expect(report.divergence?.expected).toContain('It is 43.');
    expect(report.divergence?.found).toMatch(/^turn_complete /);
    expect(report.needsModel).toBe(false);
  });

  it('refuses a position that is not a step of that kind, naming the ones there are', () => {
    const error = thrown(() =>
      run({
        kind: 'tool_result',
        position: positionOf('model_call'),
        content: 'x',
        isError: false,
      }),
    );
    expect(isAppError(error) && error.code).toBe('invalid_argument');
    expect(String(error)).toContain(
      `is a model_call, not a tool_result; the journal's tool_result positions are ${String(positionOf('tool_result'))}`,
    );
  });

  it('refuses an approval request the journal does not hold', () => {
    const error = thrown(() => run({ kind: 'approval', requestId: 'nope', decision: 'denied' }));
    expect(isAppError(error) && error.code).toBe('invalid_argument');
    expect(String(error)).toContain('no approval answer has request id nope');
  });

  it('refuses a recorded run that does not replay: there is nothing to compare with', () => {
    const broken = entries.map((e) => {
      if (e.kind !== 'tool_result') return e;
      const p = decodePayload('tool_result', e.payload);
      p.content = 'tampered';
      return { ...e, payload: encodePayload('tool_result', p) };
    });
    const error = thrown(() => run({ kind: 'model', value: 'm' }, broken));
    expect(isAppError(error) && error.code).toBe('failed_precondition');
  });
});
