import { request as httpRequest, type IncomingMessage, type ClientRequest } from 'node:http';
import { Registry } from 'prom-client';
import { AppError } from '../../common/errors';
import { encodePayload, EventKind } from '../../common/event-kinds';
import { createRootLogger } from '../../common/log';
import type { NewJournalEvent } from '../../common/state-journal';
import {
  DEFAULT_REPLIES,
  startRealTurns,
  type RealTurns,
  type RealTurnsOptions,
} from './real-turns';
import { type ScriptReply } from '../../harness/model/scripted-provider';

import type { ConversationSpec } from '../../operator/api/v1alpha1/conversation-spec';
import type { ConversationStatus } from '../../operator/api/v1alpha1/conversation-status';
import { ConversationForensics } from '../../operator/forensics/conversation-forensics';
import { tracedTurnService } from '../../operator/turns/traced-turn-service';
import type { Caller } from '../../operator/turns/turn-service';
import type { Authenticate } from '../../operator/public-api/auth-cache';
import { CallerLimits, countOwnedConversations } from '../../operator/public-api/caller-limits';
import type { FollowJournal } from '../../operator/public-api/journal-feed';
import { stateJournalFollower } from '../../operator/public-api/journal-follower';
import { KubeListener, type KubeListenerOptions } from '../../operator/kube-api/kube-listener';
import {
  PublicApiServer,
  type PublicApiServerOptions,
} from '../../operator/public-api/public-api-server';
import { RecordingFollow } from './recording-follow';
import { RecordingTurnService } from './recording-turn-service';

/** Callers the test authenticator knows, by token. */
export const ALICE: Caller = {
  identity: 'email:alice@example.com',
  identities: ['email:alice@example.com', 'slack:T1:U1'],
  personaId: 'persona-alice',
  roles: ['member'],
  sessionId: 'session-alice',
};
export const BOB: Caller = {
  identity: 'email:bob@example.com',
  identities: ['email:bob@example.com'],
  personaId: 'persona-bob',
  roles: ['member'],
  sessionId: 'session-bob',
};
export const CAROL: Caller = {
  identity: 'email:carol@example.com',
  identities: ['email:carol@example.com'],
  personaId: 'persona-carol',
  roles: ['member'],
  sessionId: 'session-carol',
};
export const ADMIN: Caller = {
  identity: 'email:root@example.com',
  identities: ['email:root@example.com'],
  personaId: 'persona-root',
  roles: ['admin'],
  sessionId: 'session-root',
};

/** A front end (chat bot, web app): the only kind of caller that may send directives. */
export const EDGE: Caller = {
  identity: 'bot:support-desk',
  identities: ['bot:support-desk'],
  personaId: 'persona-edge',
  roles: ['edge'],
  sessionId: 'session-edge',
};

/** Session-token-shaped strings (`pcs_` and 43 base64url characters). */
export const TOKENS = {
  alice: `pcs_${'A'.repeat(43)}`,
  bob: `pcs_${'B'.repeat(43)}`,
  admin: `pcs_${'C'.repeat(43)}`,
  carol: `pcs_${'D'.repeat(43)}`,
  edge: `pcs_${'E'.repeat(43)}`,
  unknown: `pcs_${'Z'.repeat(43)}`,
} as const;

/** The coordinator's clock in these tests: every `receivedAtMs` is this. */
export const TEST_NOW_MS = 1_767_225_600_000;

/** An authenticator over a token table that counts its calls; tokens can be revoked. */
export class TokenTable {
  readonly callers = new Map<string, Caller>([
    [TOKENS.alice, ALICE],
    [TOKENS.bob, BOB],
    [TOKENS.admin, ADMIN],
    [TOKENS.carol, CAROL],
    [TOKENS.edge, EDGE],
  ]);
  calls = 0;

  readonly authenticate: Authenticate = (token) => {
    this.calls += 1;
    const caller = this.callers.get(token);
    if (caller === undefined) {
      return Promise.reject(
        new AppError('unauthenticated', 'the bearer token is unknown, expired or revoked'),
      );
    }
    return Promise.resolve(caller);
  };
}

/** A running API over the real turn coordinator, with everything a test inspects. */
export interface TestApi {
  readonly server: PublicApiServer;
  readonly base: string;
  readonly port: number;
  /** The real coordinator and its ports (journal, conversations, leases, harness). */
  readonly turns: RealTurns;
  /** The coordinator as the API sees it, recording each call (and able to inject a failure). */
  readonly service: RecordingTurnService;
  /** The streams' journal follow (the production follower over the real store), recorded. */
  readonly follows: RecordingFollow;
  readonly tokens: TokenTable;
  readonly registry: Registry;
  /** Every log line, parsed. */
  readonly logs: Record<string, unknown>[];
  /** Every log line as written. */
  readonly rawLogs: string[];
  /** Test clock (ms) of the authentication cache; advance it by assignment. */
  clock: { nowMs: number };
  /**
   * Adds a Conversation owned by `owner` (with `spec` over the test spec, and a Ready status
   * unless `status` is given); returns its id.
   */
  seed(owner: string, spec?: Partial<ConversationSpec>, status?: ConversationStatus): string;
  /** The partition's events, from the real store. */
  entries(conversationId: string): Promise<{ position: number; kind: string }[]>;
  /** The partition's head. */
  head(conversationId: string): number;
  /** Appends `events` at the head, as another writer would; the store seals the batch. */
  append(conversationId: string, events: readonly NewJournalEvent[]): Promise<void>;
  /** Stops the API, then the coordinator and its ports. */
  close(): Promise<void>;
}

export type StartApiOptions = Partial<
  Omit<PublicApiServerOptions, 'service' | 'authenticate' | 'logger' | 'follow' | 'kube'>
> & {
  /** The Kubernetes door's listener (operator/kube-api/kube-listener.ts), built from these. */
  readonly kube?: KubeListenerOptions;
  /** What the scripted model answers, in order. @default {@link DEFAULT_REPLIES} */
  readonly replies?: readonly ScriptReply[];
  /** Replaces the streams' follow (a source that misbehaves); it is recorded all the same. */
  readonly follow?: (real: FollowJournal) => FollowJournal;
  /** Over the test spec of every conversation. */
  readonly spec?: Partial<ConversationSpec>;
  /** Coordinator timings. */
  readonly sandboxWaitMs?: number;
  /** Harness tools besides the built-in ones (test/support/scripted-harness.ts). */
  readonly extraTools?: RealTurnsOptions['extraTools'];
  /** The namespace of the conversations the test adds, which the harness serves. */
  readonly harnessNamespace?: string;
  /** More coordinator options (an agent directory and a model relay: agent-turns.ts). */
  readonly coordinator?: RealTurnsOptions['coordinator'];
  /**
   * Another replica of `replicaOf`'s control plane: this API serves its coordinator, journal
   * and conversations (a client that reconnects here resumes where it was); `close()` stops
   * this API only. The options that start a coordinator (`replies`, `spec`, ...) are ignored.
   */
  readonly replicaOf?: TestApi;
};

/** Starts the API on 127.0.0.1:0 over the real coordinator; close it with `close()`. */
export async function startApi(overrides: StartApiOptions = {}): Promise<TestApi> {
  const {
    replies,
    follow,
    spec,
    sandboxWaitMs,
    extraTools,
    harnessNamespace,
    coordinator,
    kube,
    replicaOf,
    ...serverOverrides
  } = overrides;
  const tokens = new TokenTable();
  const registry = new Registry();
  const logs: Record<string, unknown>[] = [];
  const rawLogs: string[] = [];
  const logger = createRootLogger({
    service: 'control-plane-test',
    level: 'debug',
    destination: {
      write(line: string) {
        rawLogs.push(line);
        const parsed: unknown = JSON.parse(line);
        if (typeof parsed === 'object' && parsed !== null) logs.push({ ...parsed });
      },
    },
  });
  const turns =
    replicaOf?.turns ??
    (await startRealTurns({
      replies: replies ?? DEFAULT_REPLIES,
      logger,
      admins: ADMIN.identities,
      ...(spec === undefined ? {} : { spec }),
      ...(extraTools === undefined ? {} : { extraTools }),
      ...(harnessNamespace === undefined ? {} : { harnessNamespace }),
      coordinator: {
        nowMs: () => TEST_NOW_MS,
        ...(sandboxWaitMs === undefined ? {} : { sandboxWaitMs }),
        ...coordinator,
      },
    }));
  // As main.ts wires it: a process that starts tracing gets the turn on the request span.
  const service = new RecordingTurnService(tracedTurnService(turns.coordinator));
  const real = stateJournalFollower(turns.journal);
  const follows = new RecordingFollow(follow === undefined ? real : follow(real));
  const clock = { nowMs: 1_000_000 };
  const server = new PublicApiServer({
    host: '127.0.0.1',
    port: 0,
    service,
    forensics: new ConversationForensics({
      journal: turns.journal,
      conversations: turns.conversations,
      holder: turns.coordinator,
      approvalKey: { keyId: turns.approvals.keyId, publicKey: turns.approvals.publicKey },
    }),
    authenticate: tokens.authenticate,
    follow: follows.follow,
    logger,
    registry,
    now: () => clock.nowMs,
    followRetry: { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 },
    journalLingerMs: 20,
    streamCloseTimeoutMs: 2_000,
    ...serverOverrides,
    ...(kube === undefined ? {} : { kube: new KubeListener(kube) }),
    // As main.ts counts them: the conversations the caller owns in the store's listing.
    limits:
      serverOverrides.limits instanceof CallerLimits
        ? serverOverrides.limits
        : {
            ownedConversations: (identity: string) =>
              countOwnedConversations(turns.conversations.list(), 'default', identity),
            ...serverOverrides.limits,
          },
  });
  const { port } = await server.start();
  const partition = (id: string): string => `conv-${id}`;
  return {
    server,
    base: `http://127.0.0.1:${String(port)}`,
    port,
    turns,
    service,
    follows,
    tokens,
    registry,
    logs,
    rawLogs,
    clock,
    seed: (owner, extra = {}, status) =>
      turns.conversations.add({ owner, ...extra }, status === undefined ? {} : { status }).metadata
        .uid ?? '',
    entries: async (id) =>
      (await turns.journal.entries(partition(id))).map(({ position, kind }) => ({
        position,
        kind,
      })),
    head: (id) => turns.journal.store.head(partition(id)).head,
    append: async (id, events) => {
      const head = turns.journal.store.head(partition(id)).head;
      await turns.journal.append(partition(id), head, events);
    },
    close: async () => {
      await server.close();
      if (replicaOf === undefined) await turns.close();
    },
  };
}

/** `count` tool_result events, each with `size` characters of content. */
export function toolResults(count: number, size = 16): NewJournalEvent[] {
  const content = 'z'.repeat(size);
  return Array.from({ length: count }, () => ({
    kind: EventKind.ToolResult,
    payload: encodePayload(EventKind.ToolResult, {
      turnId: 't',
      toolCallId: 'c',
      content,
      isError: false,
      denied: false,
      thread: '',
      delegate: '',
    }),
  }));
}

/** An answer as a test reads it. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The parsed body (undefined when it is not JSON). */
  readonly json: unknown;
}

/**
 * One request with fetch, as a well-behaved client sends it. `body` objects are sent as
 * JSON unless `rawBody` is given (then fetch labels a string `text/plain` unless `headers`
 * says otherwise); a method but GET and HEAD without a body is declared JSON too, as the
 * API asks of every POST and DELETE.
 */
export async function call(
  api: Pick<TestApi, 'base'>,
  method: string,
  path: string,
  options: {
    readonly token?: string;
    readonly body?: unknown;
    readonly rawBody?: string;
    readonly headers?: Readonly<Record<string, string>>;
  } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.rawBody !== undefined) body = options.rawBody;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = 'application/json';
  } else if (method !== 'GET' && method !== 'HEAD') {
    headers['content-type'] = 'application/json';
  }
  const response = await fetch(`${api.base}${path}`, {
    method,
    headers: { ...headers, ...options.headers },
    ...(body === undefined ? {} : { body }),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** The `error` of an error body, for assertions. */
export function errorOf(answer: Answer): { code?: unknown; message?: unknown; details?: unknown } {
  const json = answer.json;
  if (typeof json !== 'object' || json === null || !('error' in json)) {
    throw new Error(`not an error body: ${answer.text}`);
  }
  const error: unknown = json.error;
  if (typeof error !== 'object' || error === null) throw new Error(`bad error: ${answer.text}`);
  return {
    code: Reflect.get(error, 'code'),
    message: Reflect.get(error, 'message'),
    details: Reflect.get(error, 'details'),
  };
}

/**
 * Polls `condition` until it returns a value other than `undefined`/`false`, or fails
 * after `timeoutMs` naming `what`.
 */
export async function pollUntil<T>(
  what: string,
  condition: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 3_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${String(timeoutMs)} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** One parsed SSE block. */
export interface SseMessage {
  readonly id?: string;
  readonly event?: string;
  readonly data?: string;
  readonly retry?: string;
  readonly comments: readonly string[];
}

/** Parses complete SSE blocks (each ends with a blank line); returns them and the rest. */
export function parseSse(text: string): { messages: SseMessage[]; rest: string } {
  const blocks = text.split('\n\n');
  const rest = blocks.pop() ?? '';
  const messages = blocks.map((block) => {
    const fields: Record<string, string> = {};
    const comments: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) {
        comments.push(line.slice(1).trim());
        continue;
      }
      const colon = line.indexOf(':');
      const name = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /u, '');
      fields[name] = fields[name] === undefined ? value : `${fields[name]}\n${value}`;
    }
    return { ...fields, comments };
  });
  return { messages, rest };
}

/** A raw SSE client over node:http, so a test can pause reading or cut the connection. */
export class SseClient {
  readonly messages: SseMessage[] = [];
  status = 0;
  headers: IncomingMessage['headers'] = {};
  /** Resolves when the server ended the response (not when this client cut it). */
  readonly ended: Promise<void>;
  response: IncomingMessage | undefined;
  private readonly request: ClientRequest;
  private buffer = '';

  private constructor(request: ClientRequest, ended: Promise<void>) {
    this.request = request;
    this.ended = ended;
  }

  /** Opens `path` and resolves once the status line and headers arrived. */
  static open(
    api: Pick<TestApi, 'port'>,
    path: string,
    headers: Readonly<Record<string, string>>,
  ): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      let endedResolve: () => void = () => undefined;
      const ended = new Promise<void>((r) => {
        endedResolve = r;
      });
      const request = httpRequest(
        { host: '127.0.0.1', port: api.port, path, method: 'GET', headers },
        (response) => {
          client.response = response;
          client.status = response.statusCode ?? 0;
          client.headers = response.headers;
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => client.receive(chunk));
          response.on('end', endedResolve);
          response.on('error', () => undefined);
          resolve(client);
        },
      );
      const client = new SseClient(request, ended);
      request.on('error', reject);
      request.end();
    });
  }

  /** Committed events (messages with an id). */
  events(): SseMessage[] {
    return this.messages.filter((m) => m.id !== undefined);
  }

  /** Positions of the committed events, in arrival order. */
  positions(): number[] {
    return this.events().map((m) => Number(m.id));
  }

  /** Waits until `predicate` holds for the messages received. */
  waitFor(what: string, predicate: (messages: SseMessage[]) => boolean, timeoutMs = 3_000) {
    return pollUntil(what, () => predicate(this.messages), timeoutMs);
  }

  /** Cuts the connection from the client side. */
  close(): void {
    this.request.destroy();
  }

  private receive(chunk: string): void {
    const { messages, rest } = parseSse(this.buffer + chunk);
    this.messages.push(...messages);
    this.buffer = rest;
  }
}

/** The `data` of an SSE message, parsed. */
export function dataOf(message: SseMessage | undefined): Record<string, unknown> {
  if (message?.data === undefined) throw new Error('message without data');
  const value: unknown = JSON.parse(message.data);
  if (typeof value !== 'object' || value === null) throw new Error('data is not an object');
  return { ...value };
}
