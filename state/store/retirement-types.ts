/**
 * What {@link JournalStore.retire} takes and returns (docs/state-plane.md, "Retirement"):
 * the policies, the options, the retirement kept for a retired partition and the result.
 */
import type { SignedRetirement } from '../journal/retirement-record';

/** What happens to a retired partition's data. */
export const RetirePolicy = {
  /** The events go; a signed record of the final head, root and key stays. */
  Checkpoint: 'checkpoint',
  /** The events go; only a tombstone (when, who, why; no head, root or signature) stays. */
  Delete: 'delete',
} as const;
export type RetirePolicy = (typeof RetirePolicy)[keyof typeof RetirePolicy];

/** Options of {@link JournalStore.retire}. */
export interface RetireOptions {
  readonly policy: RetirePolicy;
  /** Who retires it, as the caller authenticated them; kept in the retirement. */
  readonly actor: string;
  /** Why; kept in the retirement. */
  readonly reason: string;
  /** As for an append: a retirement is a write and is fenced like one. @default 0 */
  readonly fencingToken?: number;
  /** Clock of `retiredAtMs`. @default Date.now */
  readonly now?: () => number;
}

/** What stays of a retired partition. */
export interface PartitionRetirement {
  readonly partition: string;
  readonly policy: RetirePolicy;
  readonly retiredAtMs: number;
  readonly actor: string;
  readonly reason: string;
  /** `checkpoint` only: the signed final head, root and key (docs/journal-format.md). */
  readonly signed?: SignedRetirement;
}

/** What {@link JournalStore.retire} did. */
export interface RetireResult {
  readonly retirement: PartitionRetirement;
  /** False when the partition was retired before: nothing changed. */
  readonly retiredNow: boolean;
  /** Events this call removed (0 when it removed none). */
  readonly eventsRemoved: number;
  /** For people: what was done. */
  readonly message: string;
}
