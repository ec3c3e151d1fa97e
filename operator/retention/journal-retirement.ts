/**
 * Journal retention on deletion (docs/operator.md, "Journal retention"): when a deleted
 * Conversation's children are gone, before its finalizer comes off, its journal partition
 * follows its `spec.journalRetention` (or the deployment's default). `keep` does nothing;
 * `checkpoint` and `delete` have the state plane retire the partition, as this replica,
 * under the conversation's lease and its fencing token. A failure fails the pass, so the
 * finalizer stays and the deletion is retried.
 */
import type { Logger } from 'pino';
import { AppError } from '../../common/errors';
import { partitionOf } from '../../common/partition-name';
import type { RetireOutcome, RetirePolicy } from '../../common/retire-calls';
import { JournalFencedError } from '../../common/state-call-errors';
import type { StateCallOptions } from '../../common/state-calls';
import { JournalRetention } from '../api/v1alpha1/conversation-values';
import { isLeaseHandle, type LeaseHandle, type LeaseSource } from '../lease/lease-source';

/** A deleted Conversation, with the policy its spec names (undefined: none). */
export interface DeletedConversation {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly journalRetention: JournalRetention | undefined;
}

/** What the retirement needs from the rest of the control plane. */
export interface JournalRetirementOptions {
  readonly journal: {
    retire(
      partition: string,
      request: {
        readonly policy: RetirePolicy;
        readonly actor: string;
        readonly reason: string;
        readonly fencingToken?: number;
      },
      options?: StateCallOptions,
    ): Promise<RetireOutcome>;
  };
  readonly leases: LeaseSource;
  /** The deployment's default (POLYCHROME_JOURNAL_RETENTION). */
  readonly defaultPolicy: JournalRetention;
  /** This replica's identity: the retirement's actor. */
  readonly identity: string;
  readonly log: Logger;
}

/** The policy a deleted Conversation's journal follows: its own, else the deployment's. */
export function retentionPolicyOf(
  conversation: Pick<DeletedConversation, 'journalRetention'>,
  defaultPolicy: JournalRetention,
): JournalRetention {
  return conversation.journalRetention ?? defaultPolicy;
}

/**
 * The `beforeFinalizerRemoved` step of journal retention (see the module comment).
 *
 * @throws AppError `unavailable` naming the conversation, the policy and what to do when
 *   the lease is not held or the state plane refused or failed; the pass is retried.
 */
export function journalRetirement(
  options: JournalRetirementOptions,
): (conversation: DeletedConversation) => Promise<void> {
  return async (conversation) => {
    const policy = retentionPolicyOf(conversation, options.defaultPolicy);
    const { namespace, name, uid } = conversation;
    const log = options.log.child({ namespace, conversation: name });
    if (policy === JournalRetention.Keep) {
      log.info({ policy }, 'conversation deleted; its journal is kept');
      return;
    }
    try {
      const outcome = await retireUnderLease(options, conversation, policy);
      log.info(
        { policy, retiredNow: outcome.retiredNow, eventsRemoved: outcome.eventsRemoved },
        'conversation deleted; its journal partition is retired',
      );
    } catch (cause) {
      const why = cause instanceof Error ? cause.message : String(cause);
      const error = new AppError(
        'unavailable',
        `journal retention (spec.journalRetention ${policy}) of Conversation ${namespace}/${name} ` +
          `failed: ${why}. The Conversation keeps its finalizer and its deletion is retried; if ` +
          "this persists, check the state plane and that the control plane's certificate holds " +
          'polychrome:retire, or set spec.journalRetention to keep',
        { details: { namespace, conversation: name, uid, policy }, cause },
      );
      log.error({ policy, err: why }, 'journal retention failed; deletion retried');
      throw error;
    }
  };
}

async function retireUnderLease(
  options: JournalRetirementOptions,
  conversation: DeletedConversation,
  policy: RetirePolicy,
): Promise<RetireOutcome> {
  const { namespace, name, uid } = conversation;
  const lease = await options.leases.tryAcquire({ namespace, name, uid });
  if (!isLeaseHandle(lease)) {
    throw new AppError(
      'unavailable',
      `replica ${lease.holder} holds the conversation's lease; the holder retires its journal`,
    );
  }
  const request = {
    policy,
    actor: options.identity,
    reason: `Conversation ${namespace}/${name} (uid ${uid}) deleted with spec.journalRetention ${policy}`,
  };
  const retire = (held: LeaseHandle): Promise<RetireOutcome> =>
    options.journal.retire(
      partitionOf(uid),
      { ...request, fencingToken: held.fencingToken },
      { signal: held.signal },
    );
  try {
    return await retire(lease);
  } catch (error) {
    // The Lease started over below the journal's mark (docs/state-plane.md, "Fencing"):
    // raise it past the mark and retire once more, as a turn would append.
    if (!(error instanceof JournalFencedError) || error.highestFencingToken === undefined) {
      throw error;
    }
    const raised = await options.leases.advancePast?.(lease, error.highestFencingToken);
    if (raised === undefined) throw error;
    return retire(raised);
  }
}
