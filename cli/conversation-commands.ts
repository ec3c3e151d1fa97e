import { randomUUID } from 'node:crypto';

import type { Env } from '../common/config';
import { AppError, isAppError, isRetryable } from '../common/errors';
import type { TurnReply } from './api-answers';
import type { ApiClient } from './api-client';
import { ApiCallError } from './api-errors';
import {
  ExitCode,
  Format,
  formatOptions,
  noExtra,
  parse,
  parseFormat,
  stringValue,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import type { CommandDoor, DoorCommand } from './command-door';
import {
  formatTranscript,
  formatTurnReply,
  shellWord,
  TurnOutcome,
  type CommandContext,
} from './conversation-format';
import { publicApiDoor } from './public-api-door';
import { stream } from './stream-command';

/*
 * The commands that talk to a conversation through a door (command-door.ts): send, stream
 * (stream-command.ts), approve, answer, transcript; over the public API for `polychrome`
 * (public-api-door.ts, docs/api.md), over the Kubernetes door for `kubectl polychrome`.
 */

/** Idempotency keys and request ids share the API's alphabet. */
const API_TOKEN_WORD = /^[A-Za-z0-9._:-]{1,128}$/u;

function requestIdOf(value: string | undefined, command: string): string {
  if (value === undefined) {
    throw new UsageError(`${command} needs the request id of the card (printed by send)`);
  }
  if (!API_TOKEN_WORD.test(value)) {
    throw new UsageError(
      `${JSON.stringify(value)} is not a request id: 1 to 128 of A-Z a-z 0-9 . _ : -`,
    );
  }
  return value;
}

async function printTurn(
  io: CliIo,
  format: Format,
  reply: TurnReply,
  raw: unknown,
  context: CommandContext,
  extra: Record<string, unknown> = {},
): Promise<ExitCode> {
  const { text, outcome } = formatTurnReply(reply, context);
  if (format === Format.Json) {
    const body = typeof raw === 'object' && raw !== null ? raw : {};
    await write(io.stdout, `${JSON.stringify({ ...body, ...extra })}\n`);
  } else {
    await write(io.stdout, text);
  }
  return outcome === TurnOutcome.Quarantined ? ExitCode.TurnQuarantined : ExitCode.Ok;
}

/** An interrupted request: the API may have got it. */
function isAbort(error: unknown, signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && !(error instanceof AppError);
}

async function send(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...door.options,
    ...formatOptions,
    key: { type: 'string' },
  });
  const format = parseFormat(values);
  const [id, ...words] = positionals;
  const conversationId = door.conversation(id, 'send');
  const text = words.join(' ');
  if (text.trim() === '')
    throw new UsageError('send needs the message text after the conversation id');
  const given = stringValue(values.key);
  if (given !== undefined && !API_TOKEN_WORD.test(given)) {
    throw new UsageError(
      `--key must be 1 to 128 of A-Z a-z 0-9 . _ : - (a UUID is a good key), got ${JSON.stringify(given)}`,
    );
  }
  const key = given ?? `cli-${randomUUID()}`;
  const api = await door.connect(values, env);
  const retry = [
    ...door.program,
    'send',
    conversationId,
    '--key',
    key,
    ...api.extraFlags,
    '--',
    ...words,
  ]
    .map(shellWord)
    .join(' ');
  let answer: Awaited<ReturnType<ApiClient['postMessage']>>;
  try {
    answer = await api.client.postMessage(conversationId, { text, idempotencyKey: key }, io.signal);
  } catch (error) {
    // The message may have reached the API: the same key gets that turn, not a second one.
    if (isAbort(error, io.signal)) {
      throw new AppError('cancelled', `interrupted; to get the turn's result run: ${retry}`);
    }
    // Worth a retry (common/errors.ts `isRetryable`), except a 413: a body too large is
    // refused again however often it is sent.
    if (
      isAppError(error) &&
      isRetryable(error) &&
      !(error instanceof ApiCallError && error.status === 413)
    ) {
      const retryable =
        error instanceof ApiCallError
          ? new ApiCallError(error.code, `${error.message}; retry with: ${retry}`, {
              status: error.status,
              ...(error.requestId === undefined ? {} : { requestId: error.requestId }),
            })
          : new AppError(error.code, `${error.message}; then retry with: ${retry}`);
      throw retryable;
    }
    throw error;
  }
  return printTurn(
    io,
    format,
    answer.value,
    answer.raw,
    { conversationId, extraFlags: api.extraFlags, program: door.program },
    { idempotencyKey: answer.idempotencyKey },
  );
}

async function approve(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...door.options,
    ...formatOptions,
    deny: { type: 'boolean' },
    cancel: { type: 'boolean' },
    comment: { type: 'string' },
  });
  const format = parseFormat(values);
  const [id, request, ...extra] = positionals;
  const conversationId = door.conversation(id, 'approve');
  const requestId = requestIdOf(request, 'approve');
  noExtra(extra, 'approve', `a ${door.noun} and a request id`);
  const comment = commentOf(values.comment);
  if (values.deny === true && values.cancel === true) {
    throw new UsageError('approve takes --deny or --cancel, not both');
  }
  const decision = values.cancel === true ? 'cancel' : values.deny === true ? 'deny' : 'approve';
  const api = await door.connect(values, env);
  const answer = await api.client.answerApproval(
    conversationId,
    requestId,
    { decision, ...(comment === undefined ? {} : { comment }) },
    io.signal,
  );
  if (format === Format.Text) {
    await write(
      io.stdout,
      `${decision === 'cancel' ? 'Cancelled' : decision === 'deny' ? 'Denied' : 'Approved'} request ${requestId}.\n`,
    );
  }
  return printTurn(io, format, answer.value, answer.raw, {
    conversationId,
    extraFlags: api.extraFlags,
    program: door.program,
  });
}

async function answer(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...door.options,
    ...formatOptions,
    cancel: { type: 'boolean' },
    comment: { type: 'string' },
  });
  const format = parseFormat(values);
  const [id, request, ...words] = positionals;
  const conversationId = door.conversation(id, 'answer');
  const requestId = requestIdOf(request, 'answer');
  const text = words.join(' ');
  const comment = commentOf(values.comment);
  if (values.cancel === true && text !== '') {
    throw new UsageError('answer --cancel takes no answer text; give a reason with --comment');
  }
  if (values.cancel !== true && comment !== undefined) {
    throw new UsageError('--comment goes with answer --cancel; an answer is its own text');
  }
  if (values.cancel !== true && text.trim() === '') {
    throw new UsageError('answer needs the answer text after the request id (or --cancel)');
  }
  const api = await door.connect(values, env);
  const body =
    values.cancel === true
      ? { cancel: true as const, ...(comment === undefined ? {} : { comment }) }
      : text;
  const reply = await api.client.answerQuestion(conversationId, requestId, body, io.signal);
  return printTurn(io, format, reply.value, reply.raw, {
    conversationId,
    extraFlags: api.extraFlags,
    program: door.program,
  });
}

async function transcript(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, { ...door.options, ...formatOptions });
  const format = parseFormat(values);
  const [id, ...extra] = positionals;
  const conversationId = door.conversation(id, 'transcript');
  noExtra(extra, 'transcript', `one ${door.noun}`);
  const api = await door.connect(values, env);
  const result = await api.client.transcript(conversationId, io.signal);
  await write(
    io.stdout,
    format === Format.Json
      ? `${JSON.stringify(result.raw)}\n`
      : formatTranscript(result.value, {
          conversationId,
          extraFlags: api.extraFlags,
          program: door.program,
        }),
  );
  return ExitCode.Ok;
}

/** The conversation commands by name, over any door. */
export const doorCommands = { send, stream, approve, answer, transcript } as const satisfies Record<
  string,
  DoorCommand
>;

/** The conversation commands by name, over the public API (`polychrome`). */
export const conversationCommands = Object.fromEntries(
  Object.entries(doorCommands).map(([name, command]) => [
    name,
    (args: readonly string[], env: Env | undefined, io: CliIo) =>
      command(publicApiDoor, args, env, io),
  ]),
) as Record<
  keyof typeof doorCommands,
  (args: readonly string[], env: Env | undefined, io: CliIo) => Promise<ExitCode>
>;
export type ConversationCommand = keyof typeof doorCommands;

/** True when `name` is one of {@link conversationCommands}. */
export function isConversationCommand(name: string): name is ConversationCommand {
  return Object.hasOwn(doorCommands, name);
}

/** `--comment`: 1 to 4,096 characters, or absent. */
function commentOf(value: unknown): string | undefined {
  const comment = stringValue(value);
  if (comment !== undefined && (comment.length === 0 || [...comment].length > 4096)) {
    throw new UsageError('--comment must be 1 to 4,096 characters');
  }
  return comment;
}
