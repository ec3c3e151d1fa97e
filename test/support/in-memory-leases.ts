/**
 * Conversation leases in memory behind the {@link LeaseSource} port of the turn
 * coordinator: one holder per conversation, a fencing token that grows with each new
 * holding, and a signal that aborts when the test takes the lease away. Data only.
 */
import type {
  ConversationRef,
  LeaseBusy,
  LeaseHandle,
  LeaseSource,
} from '../../operator/lease/lease-source';

interface Held {
  readonly handle: LeaseHandle;
  readonly lost: AbortController;
}

export class InMemoryLeases implements LeaseSource {
  private readonly held = new Map<string, Held>();
  private readonly transitions = new Map<string, number>();
  private readonly elsewhere = new Map<string, LeaseBusy>();
  /** Every tryAcquire, by conversation uid. */
  readonly calls: string[] = [];

  constructor(private readonly holder: string) {}

  tryAcquire(ref: ConversationRef): Promise<LeaseHandle | LeaseBusy> {
    this.calls.push(ref.uid);
    const busy = this.elsewhere.get(ref.uid);
    if (busy !== undefined) return Promise.resolve(busy);
    const current = this.held.get(ref.uid);
    if (current !== undefined && !current.handle.signal.aborted) {
      return Promise.resolve(current.handle);
    }
    const fencingToken = (this.transitions.get(ref.uid) ?? 0) + 1;
    this.transitions.set(ref.uid, fencingToken);
    const lost = new AbortController();
    const handle: LeaseHandle = {
      conversation: ref,
      leaseName: `conv-${ref.uid}`,
      holder: this.holder,
      fencingToken,
      signal: lost.signal,
    };
    this.held.set(ref.uid, { handle, lost });
    return Promise.resolve(handle);
  }

  /** Another replica takes the lease: this holder's signal aborts; tryAcquire answers `busy`. */
  takeAway(uid: string, busy: LeaseBusy): void {
    this.held.get(uid)?.lost.abort(new Error(`lease of ${uid} taken by ${busy.holder}`));
    this.held.delete(uid);
    this.elsewhere.set(uid, busy);
  }

  /** The other replica lets go: the next tryAcquire takes the lease (a higher fencing token). */
  release(uid: string): void {
    this.elsewhere.delete(uid);
  }
}
