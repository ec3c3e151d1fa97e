/**
 * Replay of journals with erased entries (docs/replay.md, "Erased entries"), written by the
 * real stack (test/support/real-turns.ts) and erased by the real journal store: an erased
 * entry is never a divergence, the steps that depended on it are listed as not checkable
 * because of it, and everything else is still checked.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from '@jest/globals';
import pino from 'pino';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import type { JournalEntry } from '../../common/state-journal';
import { requestIds } from '../../common/request-ids';
import { readyStatus } from '../../test/support/in-memory-conversations';
import {
  askReply,
  recordApprovedTurns,
  startRealTurns,
  TEST_OWNER,
  textReply,
  type RealTurns,
} from '../../test/support/real-turns';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { type ReplayEntry } from './journal-turns';
import { replayJournal } from './replay';
import { type JournalReplay } from './replay-verdict';
import { whatIf } from './what-if';

const logger = pino({ level: 'silent' });
let open: RealTurns | undefined;

afterEach(async () => {
  await open?.close();
  open = undefined;
});

function replay(entries: readonly ReplayEntry[], turns: RealTurns): JournalReplay {
  return replayJournal(entries, {
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: turns.approvals.publicKey,
  });
}

/** Positions of the events of `kind` of the journal, in order. */
function positionsOf(entries: readonly JournalEntry[], kind: string): number[] {
  return entries.filter((e) => e.kind === kind).map((e) => e.position);
}

/** The two approved turns of real-turns.ts, with `pick` erased by the real store. */
async function erasedTurns(pick: (entries: readonly JournalEntry[]) => number[]): Promise<{
  turns: RealTurns;
  before: JournalEntry[];
  entries: JournalEntry[];
  erased: number[];
}> {
  const recorded = await recordApprovedTurns(logger);
  open = recorded.turns;
  const erased = pick(recorded.entries);
  await recorded.turns.journal.erase(recorded.partition, {
    positions: erased,
    actor: 'email:admin@example.com',
    reason: 'erasure request 1',
    fencingToken: 1,
  });
  const entries = await recorded.turns.journal.entries(recorded.partition);
  return { turns: recorded.turns, before: recorded.entries, entries, erased };
}

/** `entries` with the payload of the event at `position` rewritten. */
function tampered(
  entries: readonly JournalEntry[],
  position: number,
  change: (payload: ReturnType<typeof decodePayload<'model_call'>>) => void,
): ReplayEntry[] {
  return entries.map((entry) => {
    if (entry.position !== position) return entry;
    const payload = decodePayload('model_call', entry.payload);
    change(payload);
    return { ...entry, payload: encodePayload('model_call', payload) };
  });
}

describe('replayJournal of a journal with erased entries', () => {
  it('an erased tool result: listed as erased, not compared, and the request that held it not checked', async () => {
    const { turns, entries, erased } = await erasedTurns((e) => [
      positionsOf(e, 'tool_result')[0]!,
    ]);
    const [toolResult] = erased;
    const [, secondCall] = positionsOf(entries, 'model_call');
    const result = replay(entries, turns);
    expect(result.divergence).toBeUndefined();
    expect(result.ok).toBe(true);
    expect(result.erased).toEqual([
      { position: toolResult, kind: 'tool_result', turnId: result.turns[0]?.turnId },
    ]);
    expect(result.skipped).toEqual([]);
    const [first, second] = result.turns;
    expect(first?.unchecked?.map((u) => [u.position, u.erasedPosition])).toEqual([
      [toolResult, toolResult],
      [secondCall, toolResult],
    ]);
    expect(first?.transcript).toContainEqual({
      type: 'tool_result',
      content: '[erased]',
      isError: false,
    });
    expect(first?.status).toBe('complete');
    // The tool result is no part of the history: the next turn is checked in full.
    expect(second?.ok).toBe(true);
    expect(second?.unchecked).toBeUndefined();
  }, 60_000);

  it('still catches a changed output after the erased tool result, and in another turn', async () => {
    const { turns, entries } = await erasedTurns((e) => [positionsOf(e, 'tool_result')[0]!]);
    const [, secondCall, thirdCall] = positionsOf(entries, 'model_call');
    const sameTurn = replay(
      tampered(entries, secondCall!, (p) => {
        p.content = [{ block: { $case: 'text', value: 'It is 43.' } }];
      }),
      turns,
    );
    expect(sameTurn.ok).toBe(false);
    expect(sameTurn.divergence?.expected).toContain('It is 43.');
    expect(sameTurn.divergence?.found).toContain('turn_complete');
    const otherTurn = replay(
      tampered(entries, thirdCall!, (p) => {
        p.requestSha256 = Buffer.alloc(32, 7);
      }),
      turns,
    );
    expect(otherTurn.ok).toBe(false);
    expect(otherTurn.divergence).toMatchObject({ turnId: otherTurn.turns[1]?.turnId });
    expect(otherTurn.divergence?.expected).toContain('request_sha256');
  }, 60_000);

  it('an erased message: every request that held it is not checkable because of it, in its turn and the next', async () => {
    const { turns, entries, erased } = await erasedTurns((e) => [
      positionsOf(e, 'message_received')[0]!,
    ]);
    const [message] = erased;
    const calls = positionsOf(entries, 'model_call');
    const result = replay(entries, turns);
    expect(result.divergence).toBeUndefined();
    expect(result.ok).toBe(true);
    expect(result.erased.map((e) => [e.position, e.kind])).toEqual([[message, 'message_received']]);
    const [first, second] = result.turns;
    expect(first?.transcript[0]).toEqual({ type: 'user', text: '[erased]' });
    expect(first?.status).toBe('complete');
    expect(first?.unchecked?.map((u) => [u.position, u.erasedPosition])).toEqual([
      [calls[0], message],
      [calls[1], message],
    ]);
    // The second turn's history held the erased message (it was erased after it ran).
    expect(second?.unchecked?.map((u) => [u.position, u.erasedPosition])).toEqual([
      [calls[2], message],
    ]);
    // What follows from the model's outputs is still checked: a changed tool call argument
    // is caught at the approval request although the request's digest is not checkable.
    const changed = replay(
      tampered(entries, calls[0]!, (p) => {
        const block = p.content[0]?.block;
        if (block?.$case === 'toolUse') block.value.argsJson = '{"expression":"6 * 8"}';
      }),
      turns,
    );
    expect(changed.ok).toBe(false);
    expect(changed.divergence?.found).toContain('approval_request');
  }, 60_000);

  it('an erased model output: its attempt is checked up to it, the resumed attempt not replayed, the next turn in full', async () => {
    const { turns, entries, erased } = await erasedTurns((e) => [positionsOf(e, 'model_call')[0]!]);
    const [firstCall] = erased;
    const [, resumed] = positionsOf(entries, 'turn_dispatched');
    const result = replay(entries, turns);
    expect(result.divergence).toBeUndefined();
    expect(result.ok).toBe(true);
    const [first, second] = result.turns;
    expect(first?.mode).toBe('full');
    expect(first?.unchecked?.map((u) => [u.position, u.erasedPosition])).toEqual([
      [firstCall, firstCall],
      [resumed, firstCall],
    ]);
    expect(second?.unchecked).toBeUndefined();
    expect(second?.ok).toBe(true);
    const [, thirdCall] = positionsOf(entries, 'model_call');
    const changed = replay(
      tampered(entries, thirdCall!, (p) => {
        p.content = [{ block: { $case: 'text', value: 'You are not welcome.' } }];
      }),
      turns,
    );
    expect(changed.divergence).toMatchObject({ turnId: second?.turnId });
  }, 60_000);

  it('in the weak mode: an erased output is not compared, nor the tool call it asked for; the rest is checked', async () => {
    const { turns, entries, erased } = await erasedTurns((e) => [positionsOf(e, 'model_call')[0]!]);
    // As a journal recorded before configurations were (replay.test.ts does the same).
    const weak = (journal: readonly ReplayEntry[]): ReplayEntry[] =>
      journal
        .filter((e) => e.kind !== 'agent_config')
        .map((e) => {
          if (e.kind !== 'model_call') return e;
          const p = decodePayload('model_call', e.payload);
          p.configSha256 = Buffer.alloc(0);
          p.requestSha256 = Buffer.alloc(0);
          return { ...e, payload: encodePayload('model_call', p) };
        });
    const [toolCall] = positionsOf(entries, 'tool_call');
    const result = replay(weak(entries), turns);
    expect(result.ok).toBe(true);
    expect(result.turns.map((t) => t.mode)).toEqual(['weak', 'weak']);
    expect(result.turns[0]?.unchecked?.map((u) => [u.position, u.erasedPosition])).toEqual([
      [erased[0], erased[0]],
      [toolCall, erased[0]],
    ]);
    const [, thirdCall] = positionsOf(entries, 'model_call');
    const changed = replay(
      weak(
        tampered(entries, thirdCall!, (p) => {
          p.content = [{ block: { $case: 'text', value: 'Go away.' } }];
        }),
      ),
      turns,
    );
    expect(changed.ok).toBe(false);
    expect(changed.divergence?.turnId).toBe(result.turns[1]?.turnId);
  }, 60_000);

  it('what-if refuses to change an erased position, naming it erased', async () => {
    const { turns, entries, erased } = await erasedTurns((e) => [
      positionsOf(e, 'tool_result')[0]!,
    ]);
    expect(() =>
      whatIf(
        entries,
        { kind: 'tool_result', position: erased[0]!, content: '41', isError: false },
        {
          ids: requestIds,
          verifier: nodeEd25519Verifier,
          approvalPublicKey: turns.approvals.publicKey,
          resigner: nodeEd25519Signer(randomBytes(32)),
        },
      ),
    ).toThrow(/was erased on request \(an admin's erasure or a memory clear\)/);
  }, 60_000);

  it('what-if over an erased journal: the recorded run replays, and a change elsewhere departs where it should', async () => {
    const { turns, entries, erased } = await erasedTurns((e) => [
      positionsOf(e, 'message_received')[0]!,
    ]);
    const [, , thirdCall] = positionsOf(entries, 'model_call');
    const report = whatIf(
      entries,
      {
        kind: 'model_output',
        position: thirdCall!,
        content: [{ type: 'text', text: 'Goodbye.' }],
      },
      {
        ids: requestIds,
        verifier: nodeEd25519Verifier,
        approvalPublicKey: turns.approvals.publicKey,
        resigner: nodeEd25519Signer(randomBytes(32)),
      },
    );
    expect(report.recorded.ok).toBe(true);
    expect(report.recorded.erased.map((e) => e.position)).toEqual(erased);
    expect(report.changed.erased.map((e) => e.position)).toEqual(erased);
    expect(report.divergence?.turnId).toBe(report.recorded.turns[1]?.turnId);
    expect(report.divergence?.expected).toContain('Goodbye.');
  }, 60_000);
});

describe('replayJournal of a turn that asked a question', () => {
  /** A turn that asks `which one?`, answered `this one`, with `kind`'s entry erased. */
  async function erasedQuestion(kind: 'question_request' | 'question_response') {
    const turns = await startRealTurns({
      replies: [askReply('which one?'), textReply('done')],
      logger,
    });
    open = turns;
    const conversation = turns.conversations.add(
      { owner: TEST_OWNER.identity },
      { status: readyStatus(turns.harness.endpoint) },
    );
    const conversationId = conversation.metadata.uid ?? '';
    const partition = `conv-${conversationId}`;
    const signal = AbortSignal.timeout(20_000);
    const paused = await turns.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'deploy it', idempotencyKey: 'k1' },
      signal,
    );
    const requestId = paused.question?.requestId ?? '';
    const done = await turns.coordinator.answerQuestion(
      TEST_OWNER,
      { conversationId, requestId, answer: 'this one' },
      signal,
    );
    expect(done).toMatchObject({ status: 'complete', reply: 'done' });
    const position = positionsOf(await turns.journal.entries(partition), kind)[0]!;
    await turns.coordinator.exclusive(conversation, signal, (lease) =>
      turns.journal.erase(partition, {
        positions: [position],
        actor: 'email:admin@example.com',
        reason: 'erasure request 4',
        fencingToken: lease.fencingToken,
      }),
    );
    const entries = await turns.journal.entries(partition);
    return { result: replay(entries, turns), entries, position };
  }

  it('an erased question is not compared, and the attempt after the answer is replayed in full', async () => {
    const { result, position } = await erasedQuestion('question_request');
    expect(result.ok).toBe(true);
    const [turn] = result.turns;
    expect(turn?.attempts).toBe(2);
    expect(turn?.unchecked?.map((u) => [u.position, u.erasedPosition])).toEqual([
      [position, position],
    ]);
    expect(turn?.transcript).toContainEqual({ type: 'question', question: '[erased]' });
  }, 60_000);

  it('an erased answer to it: the attempt given the answer is not replayed, and says why', async () => {
    const { result, entries, position } = await erasedQuestion('question_response');
    expect(result.ok).toBe(true);
    const [, resumed] = positionsOf(entries, 'turn_dispatched');
    expect(result.turns[0]?.unchecked?.map((u) => [u.position, u.erasedPosition])).toEqual([
      [resumed, position],
    ]);
  }, 60_000);
});

describe('replayJournal of turns run after an erasure', () => {
  it('a turn dispatched after its predecessor was erased was given a history without it, and is checked in full', async () => {
    const turns = await startRealTurns({
      replies: [textReply('one'), textReply('two'), textReply('three')],
      logger,
    });
    open = turns;
    const conversation = turns.conversations.add(
      { owner: TEST_OWNER.identity },
      { status: readyStatus(turns.harness.endpoint) },
    );
    const conversationId = conversation.metadata.uid ?? '';
    const partition = `conv-${conversationId}`;
    const signal = AbortSignal.timeout(20_000);
    const post = (text: string, key: string) =>
      turns.coordinator.postMessage(
        TEST_OWNER,
        { conversationId, text, idempotencyKey: key },
        signal,
      );
    await post('first', 'k1');
    await post('second', 'k2');
    const answers = positionsOf(await turns.journal.entries(partition), 'turn_complete');
    // As the control plane erases: holding the conversation, under its lease.
    await turns.coordinator.exclusive(conversation, signal, (lease) =>
      turns.journal.erase(partition, {
        positions: [answers[1]!],
        actor: 'email:admin@example.com',
        reason: 'erasure request 2',
        fencingToken: lease.fencingToken,
      }),
    );
    const third = await post('third', 'k3');
    expect(third.status).toBe('complete');
    const entries = await turns.journal.entries(partition);
    const result = replay(entries, turns);
    expect(result.divergence).toBeUndefined();
    expect(result.ok).toBe(true);
    expect(result.erased.map((e) => e.position)).toEqual([answers[1]]);
    const [, second, last] = result.turns;
    expect(second?.status).toBe('complete');
    expect(second?.transcript.at(-1)).toEqual({ type: 'assistant', text: '[erased]' });
    expect(second?.unchecked?.map((u) => u.erasedPosition)).toEqual([answers[1]]);
    // The control plane left the erased turn out of the third turn's history, and so does
    // replay: every request of the third turn is checked.
    expect(last?.unchecked).toBeUndefined();
    expect(last?.ok).toBe(true);
  }, 60_000);
});
