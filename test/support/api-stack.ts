/**
 * The control plane's public API as the CLI tests reach it: the real PublicApiServer over
 * the real turn coordinator, with in-memory ports and an in-process harness running the
 * scripted model (test/support/api-fixtures.ts), one conversation of Alice's,
 * and the environment the `polychrome` CLI reads to reach it as her.
 */
import {
  isEventKind,
  payloadCodecs,
  type EventKind,
  type EventPayloads,
  type PayloadCodec,
} from '../../common/event-kinds';
import { ALICE, startApi, TOKENS, type StartApiOptions, type TestApi } from './api-fixtures';

/** A running API and a conversation on it. */
export interface ApiStack {
  readonly api: TestApi;
  /** Alice's conversation (its sandbox Ready unless `status` said otherwise). */
  readonly conversationId: string;
  /** `POLYCHROME_API_URL` and `POLYCHROME_TOKEN` (Alice's session token). */
  readonly env: Readonly<Record<string, string>>;
}

/**
 * Starts the API on 127.0.0.1:0 (see `startApi`) and adds one conversation owned by Alice;
 * stop it with `api.close()`.
 */
export async function startApiStack(
  options: StartApiOptions & { readonly status?: Parameters<TestApi['seed']>[2] } = {},
): Promise<ApiStack> {
  const { status, ...apiOptions } = options;
  const api = await startApi(apiOptions);
  const conversationId = api.seed(ALICE.identity, {}, status);
  return {
    api,
    conversationId,
    env: { POLYCHROME_API_URL: api.base, POLYCHROME_TOKEN: TOKENS.alice },
  };
}

/** A committed event with its payload in proto3 JSON, as the event stream sends it. */
export interface CommittedEvent {
  readonly position: number;
  readonly kind: string;
  readonly payload: unknown;
}

function payloadJson<K extends EventKind>(kind: K, bytes: Uint8Array): unknown {
  const codec: PayloadCodec<EventPayloads[K]> = payloadCodecs[kind];
  return codec.toJSON(codec.decode(bytes));
}

/** What the conversation's journal holds, read from the real store. */
export async function committedEvents(
  api: TestApi,
  conversationId: string,
): Promise<CommittedEvent[]> {
  const entries = await api.turns.journal.entries(`conv-${conversationId}`);
  return entries.map((entry) => ({
    position: entry.position,
    kind: entry.kind,
    payload: isEventKind(entry.kind) ? payloadJson(entry.kind, entry.payload) : null,
  }));
}
