/**
 * One timer per conversation that waits on an approval, so the approval expires even when
 * nobody posts (docs/turns.md, "Expiry"). The coordinator owns the timers and hands them
 * to the runner: both make them follow each view they commit or read
 * ({@link ExpiryTimers.follow}). When one fires, the coordinator claims the conversation
 * and asks the plan whether the expiry is due (a timer only wakes the decision, it never
 * makes it).
 */
import type { JournalView } from './journal-view-types';
import { approvalDeadline } from './plan-expiry';

/** setTimeout's longest delay; a longer wait fires early and is armed again. */
const MAX_DELAY_MS = 2 ** 31 - 1;

export class ExpiryTimers {
  private readonly timers = new Map<string, { atMs: number; timer: NodeJS.Timeout }>();
  private closed = false;

  constructor(
    private readonly nowMs: () => number,
    /** How long a pending approval waits (see plan-expiry.ts). */
    private readonly approvalTtlMs: number,
    private readonly onDue: (uid: string) => void,
  ) {}

  /** Arms (or clears) the conversation's timer for the approval `view` waits on. */
  follow(uid: string, view: JournalView): void {
    const deadline = approvalDeadline(view, this.approvalTtlMs);
    if (deadline === undefined) this.clear(uid);
    else this.arm(uid, deadline.expiresAtMs);
  }

  /** Wakes `onDue(uid)` at `atMs` (at once when it has passed); replaces an earlier one. */
  arm(uid: string, atMs: number): void {
    if (this.closed || this.timers.get(uid)?.atMs === atMs) return;
    this.clear(uid);
    const delay = Math.min(Math.max(0, atMs - this.nowMs()), MAX_DELAY_MS);
    const timer = setTimeout(() => {
      this.timers.delete(uid);
      this.onDue(uid);
    }, delay);
    // A pending approval must not keep a stopping process alive.
    timer.unref();
    this.timers.set(uid, { atMs, timer });
  }

  /** Nothing to wait for in `uid` any more. */
  clear(uid: string): void {
    const armed = this.timers.get(uid);
    if (armed === undefined) return;
    clearTimeout(armed.timer);
    this.timers.delete(uid);
  }

  /** Whether a timer waits for `uid` (for tests and metrics). */
  armed(uid: string): boolean {
    return this.timers.has(uid);
  }

  close(): void {
    this.closed = true;
    for (const uid of [...this.timers.keys()]) this.clear(uid);
  }
}
