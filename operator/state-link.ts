import type { Logger } from 'pino';
import type { StateClient } from '../common/state-client';

/** A partition name no conversation has (uids are never this short): a cheap round trip. */
const PROBE_PARTITION = 'conv-link-probe';

/** Options of {@link StateLink}. */
export interface StateLinkOptions {
  /** @default 5000 */
  readonly probeIntervalMs?: number;
  /** Deadline of one probe. @default 3000 */
  readonly probeTimeoutMs?: number;
}

/**
 * The control plane's link to the state plane (docs/design.md: it connects over mTLS before it
 * binds any listener, and is not ready while the link is down). The link is up after a
 * probe went all the way through: TLS handshake with our client certificate, the state
 * plane's authorization, and its open store (`Head` of an empty partition).
 */
export class StateLink {
  private up = false;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly intervalMs: number;
  private readonly timeoutMs: number;

  constructor(
    private readonly client: StateClient,
    private readonly log: Logger,
    options: StateLinkOptions = {},
  ) {
    this.intervalMs = options.probeIntervalMs ?? 5_000;
    this.timeoutMs = options.probeTimeoutMs ?? 3_000;
  }

  /** True while the last probe succeeded. */
  isUp(): boolean {
    return this.up;
  }

  /**
   * Probes until the link is up (or `signal` aborts), then keeps probing in the
   * background so readiness follows the link.
   *
   * @throws the abort reason when `signal` aborts first.
   */
  async connect(signal?: AbortSignal): Promise<void> {
    let delay = 200;
    while (!(await this.probe())) {
      signal?.throwIfAborted();
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, this.intervalMs);
    }
    if (this.timer === undefined && !this.closed) {
      this.timer = setInterval(() => void this.probe(), this.intervalMs);
      this.timer.unref();
    }
  }

  /** Stops probing; the link counts as down. Idempotent. */
  close(): void {
    this.closed = true;
    this.up = false;
    if (this.timer !== undefined) clearInterval(this.timer);
  }

  private async probe(): Promise<boolean> {
    if (this.closed) return false;
    try {
      await this.client.head(PROBE_PARTITION, { timeoutMs: this.timeoutMs });
      if (!this.up) this.log.info('state plane link up');
      this.up = true;
    } catch (err: unknown) {
      if (this.up)
        this.log.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'state plane link down',
        );
      else
        this.log.debug(
          { err: err instanceof Error ? err.message : String(err) },
          'state plane not reachable yet',
        );
      this.up = false;
    }
    return this.up;
  }
}
