/**
 * What a crew's models answer in tests of several agents (test/support/agent-turns.ts): the
 * Messages API server's responders, keyed on each agent's system prompt (`You are NAME.`).
 */
import type { Agent } from '../../operator/api/v1alpha1/agent-resource';
import { crewAgent, startAgentTurns, type AgentTurns } from './agent-turns';
import { systemOf, type RecordedRequest, type ScriptedReply } from './messages-api-server';
import { TEST_ADMIN } from './real-turns';

/** The text of the last user message of a request: a delegate's task, or tool results. */
export function lastUserText(request: RecordedRequest): string {
  const messages = (request.body as { messages: { role: string; content: unknown }[] }).messages;
  const content = messages.at(-1)?.content;
  if (typeof content === 'string') return content;
  return (content as { type: string; text?: string; content?: unknown }[])
    .map((block) => (block.type === 'text' ? (block.text ?? '') : JSON.stringify(block.content)))
    .join('');
}

/**
 * The lead asks the researcher and the checker, then answers from what they said. Each
 * delegate's reply waits until both delegates have asked, so the panel finishes only when
 * their threads run side by side; one asked alone (after 5 s) says so in its answer.
 */
export function panelResponder(): (request: RecordedRequest) => Promise<ScriptedReply> {
  const asked = new Set<string>();
  let bothAsked = (): void => undefined;
  const together = new Promise<void>((resolve) => {
    bothAsked = resolve;
  });
  return async (request) => {
    const system = systemOf(request);
    const messages = (request.body as { messages: unknown[] }).messages;
    if (system.includes('You are lead.') && messages.length === 1) {
      const ask = (id: string, agent: string, task: string) => ({
        type: 'tool_use' as const,
        id,
        name: '__delegate_to',
        input: { agent, task },
      });
      return {
        kind: 'message',
        content: [
          ask('toolu_ask_researcher', 'researcher', 'How much was billed in March?'),
          ask('toolu_ask_checker', 'checker', 'Was the March invoice paid twice?'),
        ],
      };
    }
    if (system.includes('You are lead.')) {
      return {
        kind: 'message',
        content: [{ type: 'text', text: `lead: ${lastUserText(request)}` }],
      };
    }
    const who = system.includes('You are researcher.') ? 'researcher' : 'checker';
    asked.add(who);
    if (asked.size === 2) bothAsked();
    let timer: NodeJS.Timeout | undefined;
    const alone = await Promise.race([
      together.then(() => ''),
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve(' (asked alone)'), 5_000);
      }),
    ]);
    clearTimeout(timer);
    return {
      kind: 'message',
      content: [
        { type: 'text', text: `${who} says: ${lastUserText(request).length} chars${alone}` },
      ],
    };
  };
}

/** The panel {@link panelResponder} answers for: `lead` delegates to `researcher` and `checker`. */
export function panelCrew(): Map<string, Agent> {
  return new Map([
    ['lead', crewAgent('lead', { delegates: ['researcher', 'checker'] })],
    ['researcher', crewAgent('researcher', { description: 'Finds figures.' })],
    ['checker', crewAgent('checker', { description: 'Checks payments.' })],
  ]);
}

/** The `__delegate_to` call by which the lead of {@link startClerkTurns} asks the clerk. */
export const CLERK_THREAD = 'toolu_ask_clerk';

/** The clerk's first call (`toolu_clerk_1`): its gated calculator or a question. */
export interface ClerkCall {
  readonly name: string;
  readonly input: Record<string, unknown>;
}

/**
 * The lead asks the clerk; the clerk makes `call` (its first reply), then says what it got;
 * the lead answers with what the clerk said.
 */
export function clerkResponder(call: ClerkCall): (request: RecordedRequest) => ScriptedReply {
  return (request) => {
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
        ? use(CLERK_THREAD, '__delegate_to', { agent: 'clerk', task: 'What is 6*7?' })
        : say(`lead: ${lastUserText(request)}`);
    }
    return first
      ? use('toolu_clerk_1', call.name, call.input)
      : say(`clerk got ${lastUserText(request)}`);
  };
}

/**
 * The lead, which may ask the clerk, whose calculator waits for an approval (by an admin,
 * {@link TEST_ADMIN}); `nowMs` is the control plane's and the harness's clock.
 */
export function startClerkTurns(call: ClerkCall, nowMs?: () => number): Promise<AgentTurns> {
  return startAgentTurns({
    ...(nowMs === undefined ? {} : { nowMs }),
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
}
