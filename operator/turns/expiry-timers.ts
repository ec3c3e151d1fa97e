/**
 * One timer per conversation that waits on an approval, so the approval expires even when
 * nobody posts (docs/turns.md, "Expiry"). The coordinator arms it after every append and
 * read that leaves an approval pending; when it fires, the coordinator claims the
 * conversation and asks the plan whether the expiry is due (a timer only wakes the
 * decision, it never makes it).
 */

/** setTimeout's longest delay; a longer wait fires early and is armed again. */
const MAX_DELAY_MS = 2 ** 31 - 1;

export class ExpiryTimers {
  private readonly timers = new Map<string, { atMs: number; timer: NodeJS.Timeout }>();
  private closed = false;

  constructor(
    private readonly nowMs: () => number,
    private readonly onDue: (uid: string) => void,
  ) {}

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
