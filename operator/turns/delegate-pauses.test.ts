/**
 * A delegate that needs a person, end to end (docs/turns.md, "Delegation": what happens in
 * a thread happens to the turn): the real coordinator over in-memory ports, the real
 * harness over gRPC, each agent's model called by the control plane's relay through the
 * real Anthropic SDK against the local Messages API (test/support/agent-turns.ts). The
 * delegate's gated call, and its question, pause the whole turn with the same card,
 * naming the delegate and its thread; the answer posted through the coordinator runs on
 * in the thread, and the lead gets the delegate's answer.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { DELEGATION_DEADLINE_MS } from '../../common/delegation';
import type { AgentTurns } from '../../test/support/agent-turns';
import { CLERK_THREAD, startClerkTurns, type ClerkCall } from '../../test/support/crew-replies';
import { TEST_ADMIN, TEST_OWNER } from '../../test/support/real-turns';

let rig: AgentTurns | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

/** A tool result as the responders read it from a request (lastUserText): its content as JSON. */
const q = (text: string): string => JSON.stringify(text);

/** The lead and its clerk, whose first reply makes `call` (crew-replies.ts). */
async function clerkTurns(call: ClerkCall, nowMs?: () => number) {
  rig = await startClerkTurns(call, nowMs);
  return rig;
}

describe('a delegate that needs a person (docs/turns.md, "Delegation")', () => {
  it('pauses the whole turn for its gated call, with the card naming it; the signed approval runs the call in its thread', async () => {
    const { turns, uid, post, events } = await clerkTurns({
      name: 'calculator',
      input: { expression: '6*7' },
    });
    const paused = await post('Ask the clerk: what is 6*7?');
    expect(paused).toMatchObject({
      status: 'paused',
      approval: {
        toolCallId: 'toolu_clerk_1',
        toolName: 'calculator',
        args: { expression: '6*7' },
        agent: 'clerk',
        thread: CLERK_THREAD,
      },
    });
    // Nothing ran: the thread is open, the gated call has no result.
    expect(await events('tool_result')).toEqual([]);
    expect(turns.conversations.byUid(uid)?.status?.currentTurn).toBe(paused.turnId);
    // The owner may not approve the call their own message started; an admin may.
    const requestId = paused.approval?.requestId ?? '';
    const signal = AbortSignal.timeout(30_000);
    await expect(
      turns.coordinator.answerApproval(
        TEST_OWNER,
        { conversationId: uid, requestId, decision: 'approve' },
        signal,
      ),
    ).rejects.toMatchObject({ code: 'permission_denied' });
    const done = await turns.coordinator.answerApproval(
      TEST_ADMIN,
      { conversationId: uid, requestId, decision: 'approve' },
      signal,
    );
    expect(done).toMatchObject({ status: 'complete', turnId: paused.turnId });
    expect(done.reply).toBe(`lead: ${q(`clerk got ${q('42')}`)}`);
    // The signed answer ran the call in the clerk's thread; the thread closed with the
    // clerk's answer, which the lead got.
    const [response] = await events('approval_response');
    expect(response).toMatchObject({ requestId, toolName: 'calculator', answeredBy: 'web:admin' });
    const results = await events('tool_result');
    expect(results.map((r) => [r.toolCallId, r.content, r.thread, r.delegate])).toEqual([
      ['toolu_clerk_1', '42', CLERK_THREAD, ''],
      [CLERK_THREAD, `clerk got ${q('42')}`, '', 'clerk'],
    ]);
    const calls = (await events('model_call')).map((c) => [c.agent, c.thread]);
    expect(calls).toEqual([
      ['lead', ''],
      ['clerk', CLERK_THREAD],
      ['clerk', CLERK_THREAD],
      ['lead', ''],
    ]);
  });

  it('pauses the whole turn for its question, naming it; the answer goes back to the delegate, whose answer the lead gets', async () => {
    const { turns, uid, post, events } = await clerkTurns({
      name: '__ask_user',
      input: { question: 'Which base?' },
    });
    const paused = await post('Ask the clerk: what is 6*7?');
    expect(paused).toMatchObject({
      status: 'paused',
      question: { question: 'Which base?', agent: 'clerk', thread: CLERK_THREAD },
    });
    // Anyone who may use the conversation answers a question: here its owner.
    const done = await turns.coordinator.answerQuestion(
      TEST_OWNER,
      { conversationId: uid, requestId: paused.question?.requestId ?? '', answer: 'base ten' },
      AbortSignal.timeout(30_000),
    );
    expect(done).toMatchObject({ status: 'complete', turnId: paused.turnId });
    expect(done.reply).toBe(`lead: ${q(`clerk got ${q('base ten')}`)}`);
    const [answer] = await events('question_response');
    expect(answer).toMatchObject({ answer: 'base ten', answeredBy: 'web:owner' });
    // The request carries the control plane's time, as an approval's does: the wait it
    // starts is not counted against the clerk's deadline.
    const [request] = await events('question_request');
    expect(request!.requestedAtMs).toBeGreaterThan(0);
    expect(answer!.answeredAtMs).toBeGreaterThanOrEqual(request!.requestedAtMs);
    const results = await events('tool_result');
    expect(results.map((r) => [r.toolCallId, r.content, r.thread, r.delegate])).toEqual([
      ['toolu_clerk_1', 'base ten', CLERK_THREAD, ''],
      [CLERK_THREAD, `clerk got ${q('base ten')}`, '', 'clerk'],
    ]);
  });

  it('does not count the time the turn waited for the approval against the thread: answered 6 minutes later, the thread completes', async () => {
    let waitedMs = 0;
    const { turns, uid, post, events } = await clerkTurns(
      { name: 'calculator', input: { expression: '6*7' } },
      () => Date.now() + waitedMs,
    );
    const paused = await post('Ask the clerk: what is 6*7?');
    // The admin answers six minutes later, on both planes' clock.
    waitedMs = 6 * 60_000;
    const done = await turns.coordinator.answerApproval(
      TEST_ADMIN,
      { conversationId: uid, requestId: paused.approval?.requestId ?? '', decision: 'approve' },
      AbortSignal.timeout(30_000),
    );
    expect(done.reply).toBe(`lead: ${q(`clerk got ${q('42')}`)}`);
    // The clerk's answer came more than 5 minutes after the lead asked, wall clock.
    const [lead, , clerkAgain] = await events('model_call');
    expect(clerkAgain!.finishedAtMs - lead!.finishedAtMs).toBeGreaterThan(DELEGATION_DEADLINE_MS);
    const [request] = await events('approval_request');
    const [response] = await events('approval_response');
    expect(response!.answeredAtMs - request!.requestedAtMs).toBeGreaterThanOrEqual(waitedMs);
  });
});
