/**
 * One partition's shared follow as the journal hub keeps it (journal-hub.ts): the ring of
 * recent prepared events, the subscribers, and which of them the follow pushes to.
 */
import type { JournalSink, PreparedEvent } from './journal-feed';

/** One stream's place in a partition. */
export interface Subscriber {
  readonly sink: JournalSink;
  readonly signal: AbortSignal;
  /** The next position this subscriber takes. */
  next: number;
}

/** One partition's shared follow, its ring and its subscribers. */
export class Channel {
  readonly controller = new AbortController();
  readonly subscribers = new Set<Subscriber>();
  /**
   * The subscribers the follow's events are pushed to as they come: each at (or ahead of)
   * {@link flushedNext}, its sink not full. The others catch up on their own and come back.
   */
  readonly live = new Set<Subscriber>();
  /** Prepared events of positions [ringStart, liveNext). */
  readonly ring: PreparedEvent[] = [];
  ringStart: number;
  /** The next position the shared follow delivers. */
  liveNext: number;
  /** The end of the ring not yet pushed to {@link live}: one flush per turn of the event loop. */
  pending: PreparedEvent[] = [];
  flushing: NodeJS.Immediate | undefined;
  linger: NodeJS.Timeout | undefined;
  running: Promise<void> = Promise.resolve();
  private demandResolve: (() => void) | undefined;

  constructor(
    readonly partition: string,
    fromPosition: number,
  ) {
    this.ringStart = fromPosition;
    this.liveNext = fromPosition;
  }

  /** The next position {@link live} subscribers get (pushed up to here). */
  get flushedNext(): number {
    return this.liveNext - this.pending.length;
  }

  /** The ring's events of positions [from, to). */
  slice(from: number, to: number): PreparedEvent[] {
    return this.ring.slice(from - this.ringStart, to - this.ringStart);
  }

  append(event: PreparedEvent, ringSize: number): void {
    this.ring.push(event);
    this.pending.push(event);
    this.liveNext = event.position + 1;
    if (this.ring.length > ringSize) {
      this.ring.shift();
      this.ringStart += 1;
    }
  }

  /**
   * Whether someone wants the next event now: no subscriber (lingering: keep the ring
   * current), or one that is not a full ring behind. When every subscriber is that far
   * behind, nobody is served by reading on, so the follow waits (the journal's own
   * backpressure) — a fast subscriber keeps it going whatever the slow ones do.
   */
  hasDemand(ringSize: number): boolean {
    if (this.subscribers.size === 0 || this.live.size > 0) return true;
    const floor = this.liveNext - ringSize;
    for (const subscriber of this.subscribers) if (subscriber.next > floor) return true;
    return false;
  }

  /** Resolves once {@link hasDemand} may have changed (a subscriber moved, joined, or left). */
  demandChanged(): Promise<void> {
    return new Promise((resolve) => {
      this.demandResolve = () => {
        this.demandResolve = undefined;
        resolve();
      };
    });
  }

  /** A subscriber moved: wakes a follow waiting for demand. */
  moved(): void {
    this.demandResolve?.();
  }
}
