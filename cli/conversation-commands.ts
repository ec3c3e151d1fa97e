import { randomUUID } from 'node:crypto';

import { z } from 'zod';

import { envOptionalString, envString, parseConfig, type Env } from '../common/config';
import { AppError, isAppError, isRetryable } from '../common/errors';
import type { TurnReply } from './api-answers';
import { ApiClient } from './api-client';
import { ApiCallError } from './api-errors';
import {
  ExitCode,
  Format,
  formatOptions,
  parse,
  parseFormat,
  stringValue,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import {
  formatEventLine,
  formatTranscript,
  formatTurnReply,
  shellWord,
  TurnOutcome,
  type CommandContext,
} from './conversation-format';
import { followEvents, type StreamEvent, type TextDelta } from './event-follower';

/*
 * The commands that talk to a conversation through the control plane's public API
 * (docs/api.md): send, stream, approve, answer, transcript.
 */

/** Where the API is when neither --api nor POLYCHROME_API_URL says. */
export const DEFAULT_API_URL = 'http://127.0.0.1:8080';

const apiEnvSchema = z
  .object({
    POLYCHROME_API_URL: envString({ default: DEFAULT_API_URL }),
    POLYCHROME_TOKEN: envOptionalString(),
  })
  .transform((env) => ({ apiUrl: env.POLYCHROME_API_URL, token: env.POLYCHROME_TOKEN }));

/** The API flags every conversation command takes. */
export const apiOptions = {
  api: { type: 'string' },
  token: { type: 'string' },
} as const;

const CONVERSATION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/u;
/** Idempotency keys and request ids share the API's alphabet. */
const API_TOKEN_WORD = /^[A-Za-z0-9._:-]{1,128}$/u;
const CURSOR = /^[0-9]{1,15}$/u;

/** A connection to the API plus what printed follow-up commands must repeat. */
export interface ApiConnection {
  readonly client: ApiClient;
  /** `['--api', URL]` when the URL came from the flag, so printed commands work as given. */
  readonly extraFlags: readonly string[];
  /**
   * Reads the journal keys the Conversation's status records (base64 raw keys, in order;
   * none: `[]`) from the Conversation object itself, on a door that can read it (the
   * Kubernetes door). Absent: the door has only the control plane's answer header.
   * @throws ApiCallError, ApiUnreachableError
   */
  readonly statusJournalKeys?: (conversation: string, signal?: AbortSignal) => Promise<string[]>;
}

/**
 * Where the conversation commands reach a conversation, and how they are called: the public
 * API by uid with a token (`polychrome`), or the Kubernetes door by Conversation name through
 * the kubeconfig (`kubectl polychrome`, cli/kubectl-polychrome.ts). The commands are the same.
 */
export interface CommandDoor {
  /** The words a printed follow-up command starts with. */
  readonly program: readonly string[];
  /** The door's connection flags (every command takes them). */
  readonly options: NonNullable<Parameters<typeof parse>[1]>;
  /** The conversation positional, checked. @throws UsageError */
  conversation(value: string | undefined, command: string): string;
  /** The client, from the flags and the environment. @throws UsageError */
  connect(values: Record<string, unknown>, env: Env | undefined): Promise<ApiConnection>;
  /** The verb that follows the stream, in messages (`stream`, `logs`). */
  readonly streamVerb: string;
  /** What the conversation positional is, in messages (`conversation id`, `Conversation name`). */
  readonly noun: string;
}

/** The public API: `polychrome VERB ID`, by the Conversation's uid, with a session token. */
export const publicApiDoor: CommandDoor = {
  program: ['polychrome'],
  options: apiOptions,
  conversation: (value, command) => conversationIdOf(value, command),
  connect: (values, env) => Promise.resolve(connectApi(values, env)),
  streamVerb: 'stream',
  noun: 'conversation id',
};

/** The API client from the flags and environment. @throws UsageError */
export function connectApi(values: Record<string, unknown>, env: Env | undefined): ApiConnection {
  const config = parseConfig('polychrome CLI', apiEnvSchema, env);
  const flagUrl = stringValue(values.api);
  const url = flagUrl ?? config.apiUrl;
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new UsageError(
      `${flagUrl === undefined ? 'POLYCHROME_API_URL' : '--api'} must be an http or https URL ` +
        `such as ${DEFAULT_API_URL}, got ${JSON.stringify(url)}`,
    );
  }
  const token = stringValue(values.token) ?? config.token;
  if (token === undefined || token.trim() === '') {
    throw new UsageError(
      'no API token: pass --token T or set POLYCHROME_TOKEN to a session token ' +
        '(make dev writes one: export POLYCHROME_TOKEN=$(cat .local/dev/token))',
    );
  }
  return {
    client: new ApiClient({ baseUrl: url, token: token.trim() }),
    extraFlags: flagUrl === undefined ? [] : ['--api', flagUrl],
  };
}

/** The conversation id positional. @throws UsageError */
export function conversationIdOf(value: string | undefined, command: string): string {
  if (value === undefined) throw new UsageError(`${command} needs a conversation id`);
  if (!CONVERSATION_ID.test(value)) {
    throw new UsageError(
      `${JSON.stringify(value)} is not a conversation id: expected the Conversation's uid, a ` +
        "lower-case UUID (kubectl get conversation NAME -o jsonpath='{.metadata.uid}')",
    );
  }
  return value;
}

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

function cursorOf(values: Record<string, unknown>, flag: string): number | undefined {
  const text = stringValue(values[flag]);
  if (text === undefined) return undefined;
  if (!CURSOR.test(text)) {
    throw new UsageError(
      `--${flag} must be a journal position (0 or more, at most 15 digits), got ${JSON.stringify(text)}`,
    );
  }
  return Number(text);
}

function noExtra(extra: readonly string[], command: string, what: string): void {
  if (extra.length > 0) {
    throw new UsageError(`${command} takes ${what}, got extra ${extra.join(' ')}`);
  }
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

async function stream(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...door.options,
    ...formatOptions,
    since: { type: 'string' },
    'last-event-id': { type: 'string' },
  });
  const format = parseFormat(values);
  const [id, ...extra] = positionals;
  const conversationId = door.conversation(id, door.streamVerb);
  noExtra(extra, door.streamVerb, `one ${door.noun}`);
  const since = cursorOf(values, 'since');
  const lastEventId = cursorOf(values, 'last-event-id');
  if (since !== undefined && lastEventId !== undefined) {
    throw new UsageError('give --since N (from N) or --last-event-id N (after N), not both');
  }
  const api = await door.connect(values, env);
  const signal = io.signal ?? new AbortController().signal;
  // The delta line still open (its turn and step), closed before anything else prints.
  let openDelta: string | undefined;
  const closeDelta = async (): Promise<void> => {
    if (openDelta === undefined) return;
    openDelta = undefined;
    await write(io.stdout, '\n');
  };
  await followEvents({
    client: api.client,
    conversationId,
    start: {
      ...(since === undefined ? {} : { since }),
      ...(lastEventId === undefined ? {} : { lastEventId }),
    },
    signal,
    onEvent: async (event: StreamEvent) => {
      if (format === Format.Json) {
        await write(io.stdout, `${JSON.stringify(event)}\n`);
        return;
      }
      await closeDelta();
      await write(io.stdout, formatEventLine(event));
    },
    onDelta: async (delta: TextDelta) => {
      if (format === Format.Json) {
        await write(io.stdout, `${JSON.stringify({ kind: 'delta', ...delta })}\n`);
        return;
      }
      const which = `${delta.turnId}/${String(delta.step)}`;
      if (openDelta !== which) {
        await closeDelta();
        await write(io.stdout, `[live] step ${String(delta.step)}: `);
        openDelta = which;
      }
      await write(io.stdout, delta.text);
    },
    onNotice: async (text: string) => {
      await closeDelta();
      await write(io.stderr, `polychrome: ${text}\n`);
    },
  });
  await closeDelta();
  return ExitCode.Ok;
}

/** One conversation command over a door. */
export type DoorCommand = (
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
) => Promise<ExitCode>;

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
