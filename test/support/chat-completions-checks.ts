/**
 * The checks OpenAI's Chat Completions API makes of a request body before it samples, for
 * the local server (`chat-completions-server.ts`): the fields the API documents as
 * required, the message shapes of each role, tool messages that answer the `tool_calls` of
 * the assistant message right before them (and every call answered), tool names as the
 * API accepts them, and the options that are only allowed together. The messages are the
 * API's own wording where it is known.
 */

/** What is wrong, and the parameter it is about. */
export interface BodyProblem {
  readonly message: string;
  readonly param: string;
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/u;
const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

/** The first problem of `body`, or `undefined` when the API would accept it. */
export function checkChatBody(body: unknown): BodyProblem | undefined {
  if (!isRecord(body)) return { message: 'We could not parse the JSON body.', param: '' };
  if (typeof body.model !== 'string' || body.model === '') {
    return { message: 'you must provide a model parameter', param: 'model' };
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return { message: "[] is too short - 'messages'", param: 'messages' };
  }
  if (body.stream_options !== undefined && body.stream !== true) {
    return {
      message: "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
      param: 'stream_options',
    };
  }
  const tools = body.tools;
  if (tools !== undefined) {
    const problem = checkTools(tools);
    if (problem !== undefined) return problem;
  }
  if (body.tool_choice !== undefined && tools === undefined) {
    return {
      message:
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
      param: 'tool_choice',
    };
  }
  return checkMessages(body.messages);
}

function checkTools(tools: unknown): BodyProblem | undefined {
  if (!Array.isArray(tools)) return { message: "Invalid type for 'tools'", param: 'tools' };
  for (const [i, tool] of tools.entries()) {
    const fn = isRecord(tool) ? tool.function : undefined;
    if (!isRecord(tool) || tool.type !== 'function' || !isRecord(fn)) {
      return {
        message: `Missing required parameter: 'tools[${i}].function'.`,
        param: `tools[${i}]`,
      };
    }
    if (typeof fn.name !== 'string' || !TOOL_NAME.test(fn.name)) {
      return {
        message: `Invalid 'tools[${i}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`,
        param: `tools[${i}].function.name`,
      };
    }
    if (fn.parameters !== undefined && !isRecord(fn.parameters)) {
      return {
        message: `Invalid type for 'tools[${i}].function.parameters'`,
        param: `tools[${i}].function.parameters`,
      };
    }
  }
  return undefined;
}

function checkMessages(messages: readonly unknown[]): BodyProblem | undefined {
  // The ids of the last assistant message's tool_calls not answered yet.
  let open: Set<string> | undefined;
  for (const [i, message] of messages.entries()) {
    const param = `messages[${i}]`;
    if (!isRecord(message) || typeof message.role !== 'string' || !ROLES.has(message.role)) {
      return { message: `Invalid value for '${param}.role'.`, param: `${param}.role` };
    }
    if (message.role !== 'tool' && open !== undefined && open.size > 0) {
      return {
        message: `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`,
        param: 'messages',
      };
    }
    if (message.role === 'tool') {
      const id = message.tool_call_id;
      if (open === undefined || typeof id !== 'string' || !open.has(id)) {
        return {
          message: `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.`,
          param: `${param}.role`,
        };
      }
      open.delete(id);
      if (!isContent(message.content, false)) {
        return { message: `Invalid type for '${param}.content'.`, param: `${param}.content` };
      }
      continue;
    }
    open = undefined;
    if (message.role === 'assistant') {
      const calls = message.tool_calls;
      const problem = checkToolCalls(calls, param);
      if (problem !== undefined) return problem;
      const hasCalls = Array.isArray(calls) && calls.length > 0;
      if (!isContent(message.content, hasCalls)) {
        return { message: `Invalid type for '${param}.content'.`, param: `${param}.content` };
      }
      if (hasCalls) open = new Set(calls.filter(isRecord).map((call) => String(call.id)));
      continue;
    }
    if (!isContent(message.content, false)) {
      return { message: `Invalid type for '${param}.content'.`, param: `${param}.content` };
    }
  }
  if (open !== undefined && open.size > 0) {
    return {
      message: `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`,
      param: 'messages',
    };
  }
  return undefined;
}

function checkToolCalls(calls: unknown, param: string): BodyProblem | undefined {
  if (calls === undefined) return undefined;
  if (!Array.isArray(calls)) {
    return { message: `Invalid type for '${param}.tool_calls'.`, param: `${param}.tool_calls` };
  }
  for (const [j, call] of calls.entries()) {
    const fn = isRecord(call) ? call.function : undefined;
    if (
      !isRecord(call) ||
      typeof call.id !== 'string' ||
      call.type !== 'function' ||
      !isRecord(fn) ||
      typeof fn.name !== 'string' ||
      typeof fn.arguments !== 'string'
    ) {
      return {
        message: `Invalid value for '${param}.tool_calls[${j}]'.`,
        param: `${param}.tool_calls[${j}]`,
      };
    }
  }
  return undefined;
}

/** A string, or an array of text parts; `null` only where the message carries tool calls. */
function isContent(content: unknown, nullable: boolean): boolean {
  if (typeof content === 'string') return true;
  if (content === null || content === undefined) return nullable;
  return (
    Array.isArray(content) &&
    content.length > 0 &&
    content.every((part) => isRecord(part) && part.type === 'text' && typeof part.text === 'string')
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
