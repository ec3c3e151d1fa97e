/**
 * Which objects refer to which: `referrer` keys by the key they name, so a change of a
 * ModelConfig or an Agent queues every Agent that names it. Keys are `namespace/name`.
 */
export class ReferenceIndex {
  private readonly byTarget = new Map<string, Set<string>>();
  private readonly byReferrer = new Map<string, readonly string[]>();

  /** Records that `referrer` names exactly `targets` now (what it named before is dropped). */
  set(referrer: string, targets: readonly string[]): void {
    this.delete(referrer);
    this.byReferrer.set(referrer, targets);
    for (const target of targets) {
      let referrers = this.byTarget.get(target);
      if (referrers === undefined) {
        referrers = new Set();
        this.byTarget.set(target, referrers);
      }
      referrers.add(referrer);
    }
  }

  /** Forgets `referrer` (deleted). */
  delete(referrer: string): void {
    for (const target of this.byReferrer.get(referrer) ?? []) {
      const referrers = this.byTarget.get(target);
      referrers?.delete(referrer);
      if (referrers?.size === 0) this.byTarget.delete(target);
    }
    this.byReferrer.delete(referrer);
  }

  /** Every referrer that names `target`. */
  referrers(target: string): string[] {
    return [...(this.byTarget.get(target) ?? [])];
  }
}
