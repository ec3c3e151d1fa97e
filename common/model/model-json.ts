import { z } from 'zod';
import { canonicalJson, isJsonObject, type JsonObject } from '../canonical-json';
import { AppError } from '../errors';
import { Role, StopReason, ToolChoice, type ModelRequest, type ModelResponse } from './model-port';

/**
 * The model port's request and response as JSON text, for a model call relayed between
 * the harness and the control plane (harness.v1 `ModelRequest.request_json`,
 * `ModelAnswer.response_json`; docs/turns.md, "Who calls the model"). Written as canonical
 * JSON; read back checked field by field, since the text comes from another process: a
 * malformed one is refused with `invalid_argument` naming the field.
 */

const jsonObject = z.custom<JsonObject>(isJsonObject, { error: 'must be a JSON object' });

const textBlock = z.strictObject({ type: z.literal('text'), text: z.string() });
const toolUseBlock = z.strictObject({
  type: z.literal('tool_use'),
  id: z.string().min(1),
  name: z.string().min(1),
  input: jsonObject,
});

const contentBlock = z.discriminatedUnion('type', [
  textBlock,
  toolUseBlock,
  z.strictObject({
    type: z.literal('tool_result'),
    toolUseId: z.string().min(1),
    content: z.string(),
    isError: z.boolean(),
  }),
]);

const requestSchema = z.strictObject({
  system: z.string().optional(),
  messages: z.array(
    z.strictObject({
      role: z.enum([Role.User, Role.Assistant]),
      content: z.array(contentBlock),
    }),
  ),
  tools: z.array(
    z.strictObject({ name: z.string().min(1), description: z.string(), inputSchema: jsonObject }),
  ),
  toolChoice: z.enum([ToolChoice.Auto, ToolChoice.None]),
});

const tokens = z.number().int().nonnegative();

const responseSchema = z.strictObject({
  id: z.string().optional(),
  model: z.string(),
  content: z.array(z.discriminatedUnion('type', [textBlock, toolUseBlock])),
  stopReason: z.enum(Object.values(StopReason)),
  usage: z.strictObject({
    inputTokens: tokens,
    outputTokens: tokens,
    cacheReadInputTokens: tokens.optional(),
    cacheCreationInputTokens: tokens.optional(),
  }),
});

/** A model request as canonical JSON. */
export function modelRequestToJson(request: ModelRequest): string {
  return canonicalJson(request);
}

/**
 * A model request from JSON text.
 *
 * @throws AppError `invalid_argument` naming the first field that is not a ModelRequest's.
 */
export function modelRequestFromJson(text: string, field: string): ModelRequest {
  return parse(requestSchema, text, field, 'a model request');
}

/** A model response as canonical JSON. */
export function modelResponseToJson(response: ModelResponse): string {
  return canonicalJson(response);
}

/**
 * A model response from JSON text.
 *
 * @throws AppError `invalid_argument` naming the first field that is not a ModelResponse's.
 */
export function modelResponseFromJson(text: string, field: string): ModelResponse {
  return parse(responseSchema, text, field, 'a model response');
}

function parse<T>(schema: z.ZodType<T>, text: string, field: string, what: string): T {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new AppError('invalid_argument', `${field} is not JSON; it must hold ${what}`, {
      details: { field },
    });
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const at = [field, ...(issue?.path ?? []).map(String)].join('.');
  throw new AppError(
    'invalid_argument',
    `${at} ${issue?.message ?? 'is malformed'}: ${field} must hold ${what} (common/model/model-port.ts)`,
    { details: { field: at } },
  );
}
