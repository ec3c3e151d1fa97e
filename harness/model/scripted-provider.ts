import { readFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { isJsonObject } from '../../common/canonical-json';
import { AppError, ErrorCode } from '../../common/errors';
import {
  StopReason,
  type ModelCallOptions,
  type ModelParameters,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type OutputBlock,
} from '../../common/model/model-port';

/**
 * A model that plays recorded replies in order: the offline default, and what tests and
 * demos use. A script file (YAML or JSON) looks like:
 *
 * ```yaml
 * name: refund-demo          # optional; defaults to the file name
 * model: scripted            # optional; recorded as the model name
 * replies:
 *   - text: Let me check that order.          # shorthand: one text block
 *   - content:
 *       - text: Checking.
 *       - tool_use: { id: toolu_1, name: calculator, input: { expression: "2 + 2" } }
 *     stop_reason: tool_use   # default: tool_use when there is a tool_use, else end_turn
 *     usage: { input_tokens: 12, output_tokens: 7 }
 *   - error: { code: unavailable, message: model overloaded }   # the call rejects
 * after_script:               # optional: the reply to every call after the last one
 *   text: That was the whole script.
 * repeat: false               # optional: true plays the replies again from the first after
 *                             # the last (not with after_script)
 * ```
 *
 * Without `after_script` or `repeat`, a call past the last reply fails (a test script that
 * runs out is a mistake in the test); the demo script sets one, so a demo keeps answering.
 * `repeat` is for an agent that does the same thing every turn, such as the lead of a panel
 * that asks its panelists on every question (hack/dev's sample scripts).
 *
 * A `tool_use` without an `id` gets `toolu_<call>_<block>`, so a script replays the same
 * ids every time.
 */

const toolUseSchema = z.strictObject({
  id: z.string().min(1).optional(),
  name: z.string().min(1),
  input: z
    .record(z.string(), z.unknown())
    .default({})
    .refine(isJsonObject, 'input must be a JSON object'),
});

/**
 * Like `z.union`, but picks the branch by which key is present, so a mistake is reported
 * against the branch the author meant instead of as a bare "Invalid input".
 */
function byKey<A extends z.ZodType, B extends z.ZodType>(key: string, withKey: A, otherwise: B) {
  return z.unknown().transform((value, ctx): z.output<A> | z.output<B> => {
    const hasKey = typeof value === 'object' && value !== null && key in value;
    const parsed = (hasKey ? withKey : otherwise).safeParse(value);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) {
      ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
    }
    return z.NEVER;
  });
}

const blockSchema = byKey(
  'tool_use',
  z.strictObject({ tool_use: toolUseSchema }),
  z.strictObject({ text: z.string() }),
);

const usageSchema = z.strictObject({
  input_tokens: z.number().int().nonnegative(),
  output_tokens: z.number().int().nonnegative(),
});

const stopReasonSchema = z.enum(Object.values(StopReason));
const errorCodeSchema = z.enum(Object.values(ErrorCode));

const textReplySchema = z.strictObject({
  text: z.string(),
  stop_reason: stopReasonSchema.optional(),
  usage: usageSchema.optional(),
});

const replySchema = byKey(
  'error',
  z.strictObject({ error: z.strictObject({ code: errorCodeSchema, message: z.string() }) }),
  byKey(
    'content',
    z.strictObject({
      content: z.array(blockSchema),
      stop_reason: stopReasonSchema.optional(),
      usage: usageSchema.optional(),
    }),
    textReplySchema,
  ),
);

/** Whether a reply ends a turn: text only, no tool call. */
function endsTurn(reply: z.output<typeof replySchema>): boolean {
  if ('error' in reply) return false;
  return 'text' in reply || reply.content.every((block) => !('tool_use' in block));
}

/** The schema of a {@link ModelScript}. */
export const modelScriptSchema = z
  .strictObject({
    name: z.string().min(1).optional(),
    model: z.string().min(1).optional(),
    replies: z.array(replySchema),
    // Text only: a tool call repeated for ever would only run a turn out of steps.
    after_script: textReplySchema.optional(),
    // The whole script again; it needs a reply that ends a turn, or every turn loops on tools.
    repeat: z.boolean().optional(),
  })
  .refine((script) => !(script.repeat === true && script.after_script !== undefined), {
    message: 'set after_script or repeat, not both',
  })
  .refine((script) => script.repeat !== true || script.replies.some(endsTurn), {
    message:
      'repeat needs a reply without a tool call, or every turn would run out of steps; add a text reply',
  });

/** A parsed script. */
export type ModelScript = z.output<typeof modelScriptSchema>;

/** One reply of a script. */
export type ScriptReply = z.output<typeof replySchema>;

/** The model name recorded when a script sets none. */
export const SCRIPTED_MODEL = 'scripted';

/** Plays a {@link ModelScript}. Not safe for concurrent calls: replies are consumed in order. */
export class ScriptedProvider implements ModelProvider {
  /** The script's name, used in error messages. */
  readonly name: string;
  /** For traces: a provider of its own name, and the script's model. */
  get genAi(): { readonly provider: string; readonly model: string } {
    return { provider: 'polychrome.scripted', model: this.script.model ?? SCRIPTED_MODEL };
  }
  private readonly script: ModelScript;
  private readonly received: ModelRequest[] = [];
  /** A script has no token limit: 0. */
  readonly parameters: ModelParameters;

  /**
   * @param script replies in the order calls will consume them.
   * @param name how errors name the script. @default script.name ?? 'inline'
   */
  constructor(script: ModelScript, name?: string) {
    this.script = script;
    this.name = name ?? script.name ?? 'inline';
    this.parameters = { model: script.model ?? SCRIPTED_MODEL, maxTokens: 0 };
  }

  /**
   * Parses a script from YAML or JSON text (JSON is YAML, so one parser serves both).
   *
   * @throws AppError `invalid_argument` naming every field that does not fit.
   */
  static parse(text: string, name: string): ScriptedProvider {
    let raw: unknown;
    try {
      raw = parseYaml(text);
    } catch (error) {
      throw new AppError('invalid_argument', `model script ${name}: not valid YAML or JSON`, {
        cause: error,
        details: { script: name },
      });
    }
    const parsed = modelScriptSchema.safeParse(raw);
    if (!parsed.success) {
      throw new AppError(
        'invalid_argument',
        `model script ${name} does not fit the script format:\n${z.prettifyError(parsed.error)}`,
        { details: { script: name } },
      );
    }
    return new ScriptedProvider(parsed.data, parsed.data.name ?? name);
  }

  /**
   * Loads a script file (`.yaml`, `.yml` or `.json`).
   *
   * @throws AppError `not_found` when the file cannot be read, `invalid_argument` when it
   *   does not parse.
   */
  static async fromFile(path: string): Promise<ScriptedProvider> {
    const name = basename(path, extname(path));
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      throw new AppError(
        'not_found',
        `model script ${name}: cannot read the file; check the path`,
        {
          cause: error,
          details: { script: name },
        },
      );
    }
    return ScriptedProvider.parse(text, name);
  }

  /** Calls made so far, failed ones included. */
  get callCount(): number {
    return this.received.length;
  }

  /** The requests received, in order (for assertions). */
  get requests(): readonly ModelRequest[] {
    return this.received;
  }

  /**
   * Returns the next reply, streaming its text word by word through `onTextDelta`.
   *
   * @throws AppError `cancelled` when the signal aborts (checked between fragments);
   *   `failed_precondition` when the script has no reply left and no `after_script`; the
   *   scripted code for an `error` reply.
   */
  complete(request: ModelRequest, options: ModelCallOptions): Promise<ModelResponse> {
    try {
      return Promise.resolve(this.play(request, options));
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private play(request: ModelRequest, options: ModelCallOptions): ModelResponse {
    this.throwIfAborted(options.signal);
    const callNumber = this.received.length + 1;
    this.received.push(request);
    const { replies } = this.script;
    const reply =
      this.script.repeat === true
        ? replies[(callNumber - 1) % replies.length]
        : (replies[callNumber - 1] ?? this.script.after_script);
    if (reply === undefined) {
      throw new AppError(
        'failed_precondition',
        `scripted model ${this.name}: no reply for model call ${callNumber}; the script has ${this.script.replies.length} replies. Add replies to the script or shorten the turn.`,
        { details: { script: this.name, call: callNumber } },
      );
    }
    if ('error' in reply) {
      throw new AppError(reply.error.code, reply.error.message, {
        details: { script: this.name, call: callNumber },
      });
    }
    const content: OutputBlock[] =
      'text' in reply
        ? [{ type: 'text', text: reply.text }]
        : reply.content.map((block, i): OutputBlock => {
            if ('text' in block) return { type: 'text', text: block.text };
            return {
              type: 'tool_use',
              id: block.tool_use.id ?? `toolu_${callNumber}_${i}`,
              name: block.tool_use.name,
              input: block.tool_use.input,
            };
          });
    for (const block of content) {
      if (block.type !== 'text') continue;
      for (const fragment of block.text.match(/\s*\S+\s*|\s+/g) ?? []) {
        this.throwIfAborted(options.signal);
        options.onTextDelta?.(fragment);
      }
    }
    this.throwIfAborted(options.signal);
    const hasToolUse = content.some((block) => block.type === 'tool_use');
    return {
      model: this.script.model ?? SCRIPTED_MODEL,
      content,
      stopReason: reply.stop_reason ?? (hasToolUse ? StopReason.ToolUse : StopReason.EndTurn),
      usage: {
        inputTokens: reply.usage?.input_tokens ?? 0,
        outputTokens: reply.usage?.output_tokens ?? 0,
      },
    };
  }

  private throwIfAborted(signal: AbortSignal): void {
    if (signal.aborted) {
      throw new AppError('cancelled', `scripted model ${this.name}: the call was cancelled`);
    }
  }
}
