/** Time, injected: the reconciler asks a Clock for "now" so tests move time instead of sleeping. */
export interface Clock {
  now(): Date;
}

/** The wall clock. */
export const systemClock: Clock = { now: () => new Date() };

/** A clock that moves only when told to; for tests. */
export class ManualClock implements Clock {
  private ms: number;

  /** @param start - the initial time. */
  constructor(start: Date) {
    this.ms = start.getTime();
  }

  now(): Date {
    return new Date(this.ms);
  }

  /** Moves the clock forward by `ms` milliseconds. */
  advance(ms: number): void {
    this.ms += ms;
  }

  /** Sets the clock. */
  set(time: Date): void {
    this.ms = time.getTime();
  }
}
