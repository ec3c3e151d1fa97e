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
import { crewAgent, startAgentTurns, type AgentTurns } from '../../test/support/agent-turns';
import { lastUserText } from '../../test/support/crew-replies';
import {
  systemOf,
  type RecordedRequest,
  type ScriptedReply,
} from '../../test/support/messages-api-server';
import { TEST_ADMIN, TEST_OWNER } from '../../test/support/real-turns';

let rig: AgentTurns | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

const THREAD = 'toolu_ask_clerk';
/** A tool result as {@link lastUserText} reads it from a request: its content as JSON. */
const q = (text: string): string => JSON.stringify(text);

/**
 * The lead asks the clerk; the clerk makes `call` (its first reply), then says what it got;
 * the lead answers with what the clerk said.
 */
function clerkResponder(call: { name: string; input: Record<string, unknown> }) {
  return (request: RecordedRequest): ScriptedReply => {
    const system = systemOf(request);
    const first = (request.body as { messages: unknown[] }).messages.length === 1;
    const use = (id: string, name: string, input: Record<string, unknown>): ScriptedReply => ({
      kind: 'message',
      content: [{ type: 'tool_use', id, name, input }],
    });
    const say = (text: string): ScriptedReply => ({
      kind: 'message',
      content: [{ type: 'text', text }],
    });
    if (system.includes('You are lead.')) {
      return first
        ? use(THREAD, '__delegate_to', { agent: 'clerk', task: 'What is 6*7?' })
        : say(`lead: ${lastUserText(request)}`);
    }
    return first
      ? use('toolu_clerk_1', call.name, call.input)
      : say(`clerk got ${lastUserText(request)}`);
  };
}

/** The lead, which may ask the clerk; the clerk's calculator waits for an approval. */
async function clerkTurns(call: { name: string; input: Record<string, unknown> }) {
  rig = await startAgentTurns({
    agents: new Map([
      ['lead', crewAgent('lead', { delegates: ['clerk'] })],
      [
        'clerk',
        crewAgent('clerk', { tools: { builtin: ['calculator'], requireApproval: ['calculator'] } }),
      ],
    ]),
    entry: 'lead',
    respond: clerkResponder(call),
    admins: [TEST_ADMIN.identity],
  });
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
        thread: THREAD,
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
      ['toolu_clerk_1', '42', THREAD, ''],
      [THREAD, `clerk got ${q('42')}`, '', 'clerk'],
    ]);
    const calls = (await events('model_call')).map((c) => [c.agent, c.thread]);
    expect(calls).toEqual([
      ['lead', ''],
      ['clerk', THREAD],
      ['clerk', THREAD],
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
      question: { question: 'Which base?', agent: 'clerk', thread: THREAD },
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
    const results = await events('tool_result');
    expect(results.map((r) => [r.toolCallId, r.content, r.thread, r.delegate])).toEqual([
      ['toolu_clerk_1', 'base ten', THREAD, ''],
      [THREAD, `clerk got ${q('base ten')}`, '', 'clerk'],
    ]);
  });
});
