/**
 * `make dev`'s scripted demo model for the Agent samples (`make dev SAMPLE=panel`) when no
 * API key is set. An Agent's model calls are made by the control plane, through the real
 * provider SDK, to its ModelConfig's endpoint (docs/turns.md, "Who calls the model"); so the
 * demo is an endpoint too: the local Messages API server (test/support/messages-api-server.ts,
 * the wire protocol as the API speaks it) answering each call from the calling agent's
 * script (harness/model/agent-scripts.ts). The request does not name its agent, so the
 * agent is the one whose system prompt the request's system prompt starts with (the harness
 * puts memory and summaries after it), as the samples' Agents give them.
 */
import type { ModelResponse } from '../../common/model/model-port';
import { apiToolName } from '../../common/model/tool-names';
import type { ScriptedProvider } from '../../harness/model/scripted-provider';
import type {
  ApiStopReason,
  MessageReply,
  RecordedRequest,
  Responder,
  ScriptedBlock,
} from '../../test/support/messages-api-server';

/** An agent the demo model plays: its name and the system prompt its Agent gives it. */
export interface DemoAgent {
  readonly name: string;
  readonly systemPrompt: string;
}

/** The system prompt of a Messages API request body (a string or text blocks). */
export function systemPromptOf(body: unknown): string {
  const system: unknown =
    typeof body === 'object' && body !== null ? Reflect.get(body, 'system') : undefined;
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) return '';
  return system
    .map((block: unknown) => {
      const text: unknown =
        typeof block === 'object' && block !== null ? Reflect.get(block, 'text') : undefined;
      return typeof text === 'string' ? text : '';
    })
    .join('');
}

/**
 * The agent a request is for: the one with the longest non-empty system prompt that the
 * request's system prompt starts with; `undefined` when none does.
 */
export function agentOf(system: string, agents: readonly DemoAgent[]): string | undefined {
  let best: DemoAgent | undefined;
  for (const agent of agents) {
    if (agent.systemPrompt === '' || !system.startsWith(agent.systemPrompt)) continue;
    if (best === undefined || agent.systemPrompt.length > best.systemPrompt.length) best = agent;
  }
  return best?.name;
}

/** A scripted model's answer as the Messages API sends it. */
export function messageReplyOf(response: ModelResponse): MessageReply {
  const content = response.content.map((block): ScriptedBlock =>
    block.type === 'text'
      ? { type: 'text', text: block.text }
      : { type: 'tool_use', id: block.id, name: apiToolName(block.name), input: block.input },
  );
  const stopReason: ApiStopReason =
    response.stopReason === 'other' ? 'end_turn' : response.stopReason;
  return {
    kind: 'message',
    content,
    stopReason,
    model: response.model,
    usage: { input_tokens: response.usage.inputTokens, output_tokens: response.usage.outputTokens },
  };
}

/**
 * The responder of the demo endpoint: each request answered by its agent's script. A
 * request no script is for gets a text reply that says so and what to do, not an error,
 * so the turn settles and the user reads why.
 */
export function demoResponder(
  scripts: ReadonlyMap<string, ScriptedProvider>,
  agents: readonly DemoAgent[],
): Responder {
  return async (request: RecordedRequest) => {
    const system = systemPromptOf(request.body);
    const agent = agentOf(system, agents);
    const script = agent === undefined ? undefined : scripts.get(agent);
    if (agent === undefined || script === undefined) {
      const known = [...scripts.keys()].join(', ');
      const text = `This is make dev's scripted demo model. It plays the agents ${known} by their system prompts, and this request's system prompt is none of theirs (an Agent changed since make dev applied it?). Run make dev again, or set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real model.`;
      return { kind: 'message', content: [{ type: 'text', text }], stopReason: 'end_turn' };
    }
    const response = await script.complete(
      { system, messages: [], tools: [], toolChoice: 'auto' },
      { signal: AbortSignal.timeout(10_000) },
    );
    return messageReplyOf(response);
  };
}
