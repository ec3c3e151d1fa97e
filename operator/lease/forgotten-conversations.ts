/**
 * The conversations the API no longer has, by uid (`ConversationLeases.forget`): their
 * Leases are never taken again. Uids are never reused, so refusing one for good loses
 * nothing; only the most recent are remembered.
 */
import { AppError } from '../../common/errors';
import type { ConversationRef } from './lease-source';

/** How many forgotten conversation uids `ConversationLeases` remembers. */
export const GONE_UIDS_KEPT = 4096;

/** A set of the most recently forgotten uids, the oldest dropped past `limit`. */
export class ForgottenConversations {
  private readonly uids = new Set<string>();
  constructor(private readonly limit: number) {}

  add(uid: string): void {
    this.uids.delete(uid);
    this.uids.add(uid);
    if (this.uids.size > this.limit) {
      const oldest = this.uids.values().next();
      if (oldest.done !== true) this.uids.delete(oldest.value);
    }
  }

  has(uid: string): boolean {
    return this.uids.has(uid);
  }
}

/** The refusal of a lease for a forgotten conversation. */
export function goneError(ref: ConversationRef): AppError {
  return new AppError(
    'not_found',
    `conversation ${ref.namespace}/${ref.name} (uid ${ref.uid}) was deleted; its lease is not taken again. ` +
      'A new Conversation of the same name has a new uid: send to that one',
    { details: { namespace: ref.namespace, name: ref.name, uid: ref.uid } },
  );
}
