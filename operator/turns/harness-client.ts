/**
 * The control plane's side of `Harness.RunTurn` (proto/polychrome/harness/v1): it opens
 * the call with one `start` and hands it to the caller as a {@link HarnessCall}
 * (harness-call.ts), which the caller reads and answers. Every call is TLS, to a harness
 * that proves it serves the conversation's namespace (common/harness-identity.ts), with a
 * fresh per-conversation credential. Channels are kept per namespace and endpoint, and
 * closed when idle.
 */
import { Metadata, type ChannelCredentials } from '@grpc/grpc-js';
import type { CaBundleFile } from '../../common/ca-bundle-file';
import { HARNESS_CREDENTIAL_METADATA } from '../../common/harness-credential';
import { harnessServerName } from '../../common/harness-identity';
import { reloadingCaChannelCredentials } from '../../common/reloading-channel-credentials';
import { injectTraceMetadata } from '../../common/tracing';
import { HarnessClient, type TurnStart } from '../../proto/gen/polychrome/harness/v1/harness';
import { HarnessCall, type ChannelUse } from './harness-call';
import type { HarnessCredentials } from './harness-credentials';

export interface HarnessConnectorOptions {
  /**
   * The harness CA bundle: a harness must present a certificate it signed, for
   * `polychrome-harness.<namespace>` of the conversation's namespace. Read again while the
   * process runs (operator/harness-ca.ts), each new connection checks the harness against
   * the bundle in use then; a Buffer (PEM) is a fixed bundle.
   */
  readonly harnessCa: CaBundleFile | Buffer;
  /** Mints each call's per-conversation credential (harness-credentials.ts). */
  readonly credentials: HarnessCredentials;
  /** Close a harness channel after this long unused. @default 60000 */
  readonly idleChannelMs?: number;
  /** Longest a whole call may take (model and tools included). @default 600000 */
  readonly callDeadlineMs?: number;
}

/** Options of one {@link HarnessConnector.openTurn} call. */
export interface HarnessCallOptions {
  readonly signal?: AbortSignal;
  readonly traceparent?: string;
  /**
   * The conversation's namespace: the harness must prove it serves this namespace, and the
   * call's credential is bound to it.
   */
  readonly namespace: string;
}

interface Channel extends ChannelUse {
  readonly client: HarnessClient;
}

/** Dials harness pods and runs turns on them. */
export class HarnessConnector {
  private readonly channels = new Map<string, Channel>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly idleMs: number;
  /**
   * TLS to the harnesses: server authentication with the harness CA bundle in use at each
   * handshake, no client certificate.
   */
  private readonly tls: ChannelCredentials;

  constructor(private readonly options: HarnessConnectorOptions) {
    this.tls = reloadingCaChannelCredentials(options.harnessCa);
    this.idleMs = options.idleChannelMs ?? 60_000;
    this.sweeper = setInterval(() => this.sweep(), Math.max(1_000, this.idleMs / 2));
    this.sweeper.unref();
  }

  /**
   * Opens one turn (or one attempt of it) on the harness at `endpoint` (`host:port`) and
   * sends its start; the caller reads the call to its end or cancels it (harness-call.ts
   * says what reading it throws). The call carries the active trace context, so the
   * harness's RunTurn SERVER span is a child of the caller's span; no CLIENT span is made
   * here (docs/observability.md#spans). It ends at the deadline, or when `signal` aborts.
   */
  openTurn(endpoint: string, start: TurnStart, options: HarnessCallOptions): HarnessCall {
    const channel = this.channel(options.namespace, endpoint);
    const stream = channel.client.runTurn(this.metadata(start, options), {
      deadline: Date.now() + (this.options.callDeadlineMs ?? 600_000),
    });
    const call = new HarnessCall(endpoint, stream, channel, options.signal);
    stream.write({ input: { $case: 'start', value: start } });
    return call;
  }

  /** The call's metadata: the conversation's fresh credential (never logged) and the trace context. */
  private metadata(start: TurnStart, options: HarnessCallOptions): Metadata {
    const metadata = new Metadata();
    metadata.set(
      HARNESS_CREDENTIAL_METADATA,
      this.options.credentials.mint(start.conversationId, options.namespace),
    );
    // The active span's context when tracing is on; else the caller's own id, for the log.
    injectTraceMetadata(metadata);
    if (options.traceparent !== undefined && metadata.get('traceparent').length === 0) {
      metadata.set('traceparent', options.traceparent);
    }
    return metadata;
  }

  /** Closes every channel. */
  close(): void {
    clearInterval(this.sweeper);
    for (const channel of this.channels.values()) channel.client.close();
    this.channels.clear();
  }

  /**
   * The channel to the harness of `namespace` at `endpoint`. The namespace is part of the
   * key: a pod address reused by another namespace's harness gets a channel that checks
   * for that namespace's name, never one made for the first.
   */
  private channel(namespace: string, endpoint: string): Channel {
    const key = `${namespace}/${endpoint}`;
    let channel = this.channels.get(key);
    if (channel === undefined) {
      const name = harnessServerName(namespace);
      channel = {
        client: new HarnessClient(endpoint, this.tls, {
          // The name the harness's certificate must carry (checked with the harness CA).
          'grpc.ssl_target_name_override': name,
          'grpc.default_authority': name,
          // A turn can wait minutes for a model between messages; keep the link checked.
          'grpc.keepalive_time_ms': 30_000,
          'grpc.keepalive_timeout_ms': 10_000,
        }),
        lastUsedMs: Date.now(),
        calls: 0,
      };
      this.channels.set(key, channel);
    }
    return channel;
  }

  private sweep(): void {
    const now = Date.now();
    for (const [key, channel] of this.channels) {
      if (channel.calls === 0 && now - channel.lastUsedMs > this.idleMs) {
        channel.client.close();
        this.channels.delete(key);
      }
    }
  }
}
