import type { Logger } from 'pino';

import { AppError, isAppError } from '../../common/errors';
import type { SignedRoot } from '../../proto/gen/polychrome/events/v1/events';
import type {
  AppendRequest,
  AppendResponse,
  ExportItem,
  ExportRequest,
  HeadRequest,
  HeadResponse,
  JournalEvent,
  JournalServer,
  ListPartitionsRequest,
  ListPartitionsResponse,
  ProofRequest,
  ProofResponse,
  ReadRequest,
  RepairRequest,
  RepairResponse,
  EraseRequest,
  EraseResponse,
  VerifyRequest,
  VerifyResponse,
} from '../../proto/gen/polychrome/state/v1/state';
import type { JournalCheckpoint, SignatureCheck } from '../journal/verification-types';
import { followJournal } from '../store/follow-journal';
import type { StoredSignedRoot } from '../store/append-batch';
import type { JournalStore } from '../store/journal-store';
import { createCallHandlers } from './call-handlers';
import { memoryClearHandlers } from './memory-clear-handler';
import { retireHandlers } from './retire-handlers';
import { StateService } from './rpc-roles';
import { VerifyOutcomeLabel, type StateMetrics } from './state-metrics';

/** A public key the state plane holds, sent with every export. */
export interface HeldPublicKey {
  readonly keyId: string;
  readonly publicKey: Uint8Array;
}

/** Options of {@link createJournalService}. */
export interface JournalServiceOptions {
  readonly store: JournalStore;
  readonly log: Logger;
  readonly metrics?: StateMetrics;
  /**
   * Every key the store signs with or held before (active first): the offline verifier
   * needs the one that signed a partition's first root.
   */
  readonly publicKeys: readonly HeldPublicKey[];
  /** Runs Verify's signature checks off the event loop (state/verify-pool.ts). */
  readonly checkSignatures?: (checks: readonly SignatureCheck[]) => Promise<readonly boolean[]>;
  /**
   * Appends in flight, so shutdown can wait for them: called with each append's promise.
   */
  readonly trackAppend?: (work: Promise<unknown>) => void;
  /**
   * Aborted when the server shuts down: every follow read then ends with UNAVAILABLE
   * (the abort reason, or a message naming the position to resume from). Without it a
   * follow read ends only when its caller cancels or its limit is reached.
   */
  readonly shutdown?: AbortSignal;
  /**
   * Fault injection for crash tests only (`STATE_FAULT_APPEND_DELAY`): an append whose batch
   * has an event of `kind` waits `ms` before it is written, so a test can kill the process
   * while that batch is in flight.
   */
  readonly faultAppendDelay?: { readonly kind: string; readonly ms: number };
}

function signedRootToProto(root: StoredSignedRoot): SignedRoot {
  return {
    leafCount: root.leafCount,
    root: Buffer.from(root.root),
    keyId: root.keyId,
    signature: Buffer.from(root.signature),
    version: root.version === 2 ? 2 : 0,
    partition: root.partition ?? '',
  };
}

function eventToProto(event: {
  position: number;
  kind: string;
  payload: Uint8Array;
  excisedLeaf?: Uint8Array;
}): JournalEvent {
  return {
    position: event.position,
    kind: event.kind,
    payload: Buffer.from(event.payload),
    excised: event.excisedLeaf !== undefined,
    leafDigest: Buffer.from(event.excisedLeaf ?? new Uint8Array(0)),
  };
}

/**
 * The checkpoint of a VerifyRequest.
 *
 * @throws AppError `invalid_argument` when the root is not 32 bytes or the head is 0.
 */
function checkpointFromProto(
  partition: string,
  proto: VerifyRequest['checkpoint'],
): JournalCheckpoint | undefined {
  if (proto === undefined) return undefined;
  if (proto.head < 1 || proto.root.length !== 32) {
    throw new AppError(
      'invalid_argument',
      `${partition}: a checkpoint needs a head of at least 1 and a 32-byte root, got head ` +
        `${String(proto.head)} and ${String(proto.root.length)} root bytes; pass the head and last ` +
        "signed root from the Conversation's status.journal",
      { details: { partition, field: 'checkpoint' } },
    );
  }
  return {
    head: proto.head,
    root: new Uint8Array(proto.root),
    ...(proto.keyId === '' ? {} : { keyId: proto.keyId }),
  };
}

/**
 * The Journal service over a {@link JournalStore}: each call is authorized from the
 * caller's certificate, then handed to the store; AppErrors go back as the status and
 * trailing metadata of common/state-client.ts. Streams honour backpressure (a `write`
 * that returns false waits for `drain`) and a cancelled call aborts the store's read.
 * A follow read tails the partition through the store's commit listeners; it ends with
 * UNAVAILABLE when `options.shutdown` fires.
 */
export function createJournalService(options: JournalServiceOptions): JournalServer {
  const { store, metrics } = options;

  const { unary, streaming } = createCallHandlers({
    ...options,
    service: StateService.Journal,
  });

  async function* exportItems(partition: string, signal: AbortSignal): AsyncGenerator<ExportItem> {
    // Keys first, so an offline verifier has its trust anchors before the first event.
    for (const key of options.publicKeys) {
      yield {
        item: {
          $case: 'publicKey',
          value: { keyId: key.keyId, publicKey: Buffer.from(key.publicKey) },
        },
      };
    }
    // The store's export is typed records (its NDJSON file is written from the same
    // records); the wire carries each event as a typed message, the header not at all.
    for await (const record of store.exportRecords(partition, { signal })) {
      if (record.type === 'event')
        yield { item: { $case: 'event', value: eventToProto(record.event) } };
    }
  }

  async function* readItems(
    request: ReadRequest,
    signal: AbortSignal,
  ): AsyncGenerator<JournalEvent> {
    const limit = request.limit === 0 ? Number.MAX_SAFE_INTEGER : request.limit;
    for await (const event of store.read(request.partition, request.fromPosition, limit, {
      signal,
    })) {
      yield eventToProto(event);
    }
  }

  /**
   * A live tail (state/store/follow-journal.ts) that ends with UNAVAILABLE, naming the
   * position to resume from, when the server shuts down.
   */
  async function* followItems(
    request: ReadRequest,
    signal: AbortSignal,
  ): AsyncGenerator<JournalEvent> {
    const { partition } = request;
    let next = request.fromPosition;
    try {
      for await (const event of followJournal(
        store,
        partition,
        request.fromPosition,
        request.limit,
        signal,
      )) {
        next = event.position + 1;
        yield eventToProto(event);
      }
    } catch (error) {
      if (options.shutdown?.aborted === true) {
        throw new AppError(
          'unavailable',
          `the state plane is shutting down; reconnect and follow ${partition} again from ` +
            `position ${String(next)}, the one after the last event received`,
          { details: { partition, position: next }, cause: error },
        );
      }
      throw error;
    }
  }

  return {
    append: unary<AppendRequest, AppendResponse>('Append', async (request, { signal, log }) => {
      const started = process.hrtime.bigint();
      const fault = options.faultAppendDelay;
      if (fault !== undefined && request.events.some((e) => e.kind === fault.kind)) {
        log.warn({ partition: request.partition, ...fault }, 'fault injection: holding an append');
        await new Promise((resolve) => setTimeout(resolve, fault.ms));
      }
      const work = store.append(
        request.partition,
        request.expectedHead,
        request.events.map((e) => ({ kind: e.kind, payload: e.payload })),
        { signal, fencingToken: request.fencingToken, expectedRoot: request.expectedRoot },
      );
      options.trackAppend?.(work);
      const seconds = (): number => Number(process.hrtime.bigint() - started) / 1e9;
      try {
        const result = await work;
        metrics?.appendDuration.observe({ outcome: 'ok' }, seconds());
        if (result.keyRotation !== undefined) {
          log.info(
            { partition: request.partition, ...result.keyRotation },
            'partition handed over to the active signing key',
          );
        }
        return {
          firstPosition: result.firstPosition,
          head: result.head,
          signedRootPosition: result.signedRoot.position,
          signedRoot: signedRootToProto(result.signedRoot),
        };
      } catch (error) {
        metrics?.appendDuration.observe(
          { outcome: isAppError(error) ? error.code : 'internal' },
          seconds(),
        );
        throw error;
      }
    }),
    read: streaming<ReadRequest, JournalEvent>(
      'Read',
      (request, { signal }) =>
        request.follow ? followItems(request, signal) : readItems(request, signal),
      { endsOnShutdown: (request) => request.follow },
    ),
    head: unary<HeadRequest, HeadResponse>('Head', (request) => {
      const head = store.head(request.partition);
      return Promise.resolve({
        head: head.head,
        lastSignedRoot:
          head.signedRoot === undefined ? undefined : signedRootToProto(head.signedRoot),
        lastSignedRootPosition: head.signedRoot?.position ?? 0,
      });
    }),
    proof: unary<ProofRequest, ProofResponse>('Proof', async (request) => {
      const proof = await store.proof(
        request.partition,
        request.position,
        request.leafCount === 0 ? undefined : request.leafCount,
      );
      return {
        position: proof.event.position,
        leafCount: proof.proof.leafCount,
        leafDigest: Buffer.from(proof.leaf),
        digests: proof.proof.digests.map((d) => Buffer.from(d)),
        root: Buffer.from(proof.signedRoot.root),
        signedRoot: signedRootToProto(proof.signedRoot),
        signedRootPosition: proof.signedRoot.position,
      };
    }),
    verify: unary<VerifyRequest, VerifyResponse>('Verify', async (request, { signal, log }) => {
      let result;
      try {
        const checkpoint = checkpointFromProto(request.partition, request.checkpoint);
        result = await store.verify(request.partition, {
          signal,
          ...(checkpoint === undefined ? {} : { checkpoint }),
          ...(options.checkSignatures === undefined
            ? {}
            : { checkSignatures: options.checkSignatures }),
        });
      } catch (error) {
        metrics?.verifications.inc({ outcome: VerifyOutcomeLabel.Error });
        throw error;
      }
      metrics?.verifications.inc({
        outcome: result.ok ? VerifyOutcomeLabel.Ok : VerifyOutcomeLabel.Failed,
      });
      if (result.failure !== undefined) {
        log.warn(
          {
            partition: request.partition,
            position: result.failure.position,
            reason: result.failure.reason,
          },
          'journal verification failed',
        );
      }
      return {
        ok: result.ok,
        events: result.leafCount,
        signedRoots: result.signedRootCount,
        unsealed: result.unsealed.count,
        failure:
          result.failure === undefined
            ? undefined
            : {
                position: result.failure.position,
                reason: result.failure.reason,
                expected: result.failure.expected,
                found: result.failure.found,
                message: result.failure.message,
              },
        excised: [...result.excised],
        erased: [...result.erased],
        checkpointChecked: result.checkpointChecked,
      };
    }),
    repair: unary<RepairRequest, RepairResponse>('Repair', async (request, { signal, log }) => {
      const result = await store.repair(request.partition, {
        actor: request.actor,
        reason: request.reason,
        dryRun: request.dryRun,
        fencingToken: request.fencingToken,
        signal,
      });
      if (!result.dryRun && result.excised.length > 0) {
        log.warn(
          {
            partition: request.partition,
            actor: request.actor,
            positions: result.excised.map((e) => e.position),
          },
          'journal repaired: unreadable entries excised',
        );
      }
      return {
        excised: result.excised.map((e) => ({
          position: e.position,
          leafDigest: Buffer.from(e.leaf),
          problem: e.problem,
        })),
        dryRun: result.dryRun,
        head: result.head,
        signedRoot:
          result.signedRoot === undefined ? undefined : signedRootToProto(result.signedRoot),
        signedRootPosition: result.signedRoot?.position ?? 0,
        message: result.message,
      };
    }),
    // ---- erasure (docs/state-plane.md, "Erasure") ----
    erase: unary<EraseRequest, EraseResponse>('Erase', async (request, { signal, log }) => {
      const result = await store.erase(request.partition, {
        positions: request.positions,
        actor: request.actor,
        reason: request.reason,
        dryRun: request.dryRun,
        fencingToken: request.fencingToken,
        signal,
      });
      const positions = result.erased.map((e) => e.position);
      if (!result.dryRun) {
        const fields = { partition: request.partition, actor: request.actor, positions };
        log.warn(fields, 'journal entries erased');
      }
      return {
        erased: result.erased.map((e) => ({
          position: e.position,
          leafDigest: Buffer.from(e.leaf),
          kind: e.kind,
          turnId: e.turnId,
        })),
        dryRun: result.dryRun,
        head: result.head,
        signedRoot:
          result.signedRoot === undefined ? undefined : signedRootToProto(result.signedRoot),
        signedRootPosition: result.signedRoot?.position ?? 0,
        message: result.message,
      };
    }),
    export: streaming<ExportRequest, ExportItem>('Export', (request, { signal }) =>
      exportItems(request.partition, signal),
    ),
    listPartitions: unary<ListPartitionsRequest, ListPartitionsResponse>('ListPartitions', () =>
      Promise.resolve({ partitions: store.listPartitions().map((p) => p.partition) }),
    ),
    ...retireHandlers(store, unary),
    ...memoryClearHandlers(store, unary, signedRootToProto, options.trackAppend),
  };
}
