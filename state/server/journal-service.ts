import { once } from 'node:events';

import type {
  sendUnaryData,
  ServerUnaryCall,
  ServerWritableStream,
  StatusObject,
} from '@grpc/grpc-js';
import type { Logger } from 'pino';

import { AppError, errorStatus, isAppError } from '../../common/errors';
import { grpcStatusOf } from '../../common/state-client';
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
  VerifyRequest,
  VerifyResponse,
} from '../../proto/gen/polychrome/state/v1/state';
import type { SignatureCheck } from '../journal/verify-journal';
import type { JournalStore, StoredSignedRoot } from '../store/journal-store';
import {
  authorize,
  callerIdentityOf,
  describeIdentity,
  StateAccess,
  type CallerIdentity,
} from './caller-identity';
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
}

/** The gRPC status name for a metrics label (a closed set). */
function grpcName(code: number): string {
  const names: Record<number, string> = {
    0: 'OK',
    1: 'CANCELLED',
    3: 'INVALID_ARGUMENT',
    4: 'DEADLINE_EXCEEDED',
    5: 'NOT_FOUND',
    6: 'ALREADY_EXISTS',
    7: 'PERMISSION_DENIED',
    8: 'RESOURCE_EXHAUSTED',
    9: 'FAILED_PRECONDITION',
    10: 'ABORTED',
    13: 'INTERNAL',
    14: 'UNAVAILABLE',
    15: 'DATA_LOSS',
    16: 'UNAUTHENTICATED',
  };
  return names[code] ?? 'UNKNOWN';
}

function signedRootToProto(root: StoredSignedRoot): SignedRoot {
  return {
    leafCount: root.leafCount,
    root: Buffer.from(root.root),
    keyId: root.keyId,
    signature: Buffer.from(root.signature),
  };
}

function isExportEventLine(
  value: unknown,
): value is { position: number; kind: string; payloadHex: string } {
  return (
    typeof value === 'object' &&
    value !== null &&
    'position' in value &&
    typeof value.position === 'number' &&
    'kind' in value &&
    typeof value.kind === 'string' &&
    'payloadHex' in value &&
    typeof value.payloadHex === 'string'
  );
}

/** Any call grpc-js hands a handler: what authorization and cancellation need. */
type AnyCall = ServerUnaryCall<unknown, unknown> | ServerWritableStream<unknown, unknown>;

interface CallContext {
  readonly identity: CallerIdentity;
  readonly signal: AbortSignal;
  readonly log: Logger;
}

function asAppError(error: unknown, log: Logger, method: string): AppError {
  if (isAppError(error)) return error;
  // Not ours: the detail goes to the log, the caller gets a generic message.
  log.error({ err: error, method }, 'call failed with an unexpected error');
  return new AppError(
    'internal',
    `${method} hit an internal error in the state plane; see its log`,
    {
      cause: error,
    },
  );
}

function statusError(error: AppError): Partial<StatusObject> & Error {
  return Object.assign(new Error(error.message), grpcStatusOf(error));
}

/**
 * The Journal service over a {@link JournalStore}: each call is authorized from the
 * caller's certificate, then handed to the store; AppErrors go back as the status and
 * trailing metadata of common/state-client.ts. Streams honour backpressure (a `write`
 * that returns false waits for `drain`) and a cancelled call aborts the store's read.
 */
export function createJournalService(options: JournalServiceOptions): JournalServer {
  const { store, metrics } = options;

  function begin(call: AnyCall, method: string, access: StateAccess): CallContext {
    const controller = new AbortController();
    call.on('cancelled', () =>
      controller.abort(new AppError('cancelled', `${method} was cancelled by the caller`)),
    );
    const identity = authorize(
      callerIdentityOf(call.getAuthContext().sslPeerCertificate),
      method,
      access,
    );
    return {
      identity,
      signal: controller.signal,
      log: options.log.child({ method, caller: describeIdentity(identity) }),
    };
  }

  function count(method: string, code: number): void {
    metrics?.calls.inc({ method, status: grpcName(code) });
  }

  function unary<Req, Res>(
    method: string,
    access: StateAccess,
    run: (request: Req, context: CallContext) => Promise<Res>,
  ): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
    return (call, callback) => {
      let context: CallContext;
      try {
        context = begin(call, method, access);
      } catch (error) {
        const appError = asAppError(error, options.log, method);
        options.log.warn({ method, code: appError.code, err: appError }, 'call refused');
        count(method, errorStatus[appError.code].grpc);
        callback(statusError(appError));
        return;
      }
      // A handler that throws synchronously (a bad partition name in store.head) must
      // still answer with its status.
      new Promise<Res>((resolve) => resolve(run(call.request, context))).then(
        (response) => {
          count(method, 0);
          callback(null, response);
        },
        (error: unknown) => {
          const appError = asAppError(error, context.log, method);
          count(method, errorStatus[appError.code].grpc);
          context.log.debug({ code: appError.code, message: appError.message }, 'call failed');
          callback(statusError(appError));
        },
      );
    };
  }

  function streaming<Req, Item>(
    method: string,
    access: StateAccess,
    produce: (request: Req, context: CallContext) => AsyncIterable<Item>,
  ): (call: ServerWritableStream<Req, Item>) => void {
    return (call) => {
      let context: CallContext;
      try {
        context = begin(call, method, access);
      } catch (error) {
        const appError = asAppError(error, options.log, method);
        options.log.warn({ method, code: appError.code, err: appError }, 'call refused');
        count(method, errorStatus[appError.code].grpc);
        call.emit('error', statusError(appError));
        return;
      }
      void pump(call, produce(call.request, context), context).then(
        () => count(method, 0),
        (error: unknown) => {
          const appError = asAppError(error, context.log, method);
          count(method, errorStatus[appError.code].grpc);
          // A cancelled call has nobody listening; anything else gets its status.
          if (!call.cancelled) call.emit('error', statusError(appError));
        },
      );
    };
  }

  async function pump<Item>(
    call: ServerWritableStream<unknown, Item>,
    items: AsyncIterable<Item>,
    context: CallContext,
  ): Promise<void> {
    for await (const item of items) {
      if (context.signal.aborted) throw context.signal.reason;
      if (!call.write(item)) {
        // Backpressure: the client (or HTTP/2 flow control) is behind; wait for room, or
        // stop at once if the call goes away meanwhile.
        const controller = new AbortController();
        const stop = (): void => controller.abort();
        context.signal.addEventListener('abort', stop, { once: true });
        try {
          await once(call, 'drain', { signal: controller.signal });
        } catch {
          throw context.signal.reason;
        } finally {
          context.signal.removeEventListener('abort', stop);
        }
      }
    }
    call.end();
  }

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
    let header = true;
    for await (const chunk of store.export(partition, { signal })) {
      // The store's export is NDJSON (its own format, verified by its tests); the wire
      // carries the events as typed messages, so each line is parsed back here.
      if (header) {
        header = false;
        continue;
      }
      const parsed: unknown = JSON.parse(Buffer.from(chunk).toString('utf8'));
      if (!isExportEventLine(parsed)) {
        throw new AppError(
          'internal',
          `${partition}: the store's export produced a line the server cannot read`,
        );
      }
      yield {
        item: {
          $case: 'event',
          value: {
            position: parsed.position,
            kind: parsed.kind,
            payload: Buffer.from(parsed.payloadHex, 'hex'),
          },
        },
      };
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
      yield { position: event.position, kind: event.kind, payload: Buffer.from(event.payload) };
    }
  }

  return {
    append: unary<AppendRequest, AppendResponse>(
      'Append',
      StateAccess.Write,
      async (request, { signal, log }) => {
        const started = process.hrtime.bigint();
        const work = store.append(
          request.partition,
          request.expectedHead,
          request.events.map((e) => ({ kind: e.kind, payload: e.payload })),
          { signal },
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
      },
    ),
    read: streaming<ReadRequest, JournalEvent>('Read', StateAccess.Read, (request, { signal }) =>
      readItems(request, signal),
    ),
    head: unary<HeadRequest, HeadResponse>('Head', StateAccess.Read, (request) => {
      const head = store.head(request.partition);
      return Promise.resolve({
        head: head.head,
        lastSignedRoot:
          head.signedRoot === undefined ? undefined : signedRootToProto(head.signedRoot),
        lastSignedRootPosition: head.signedRoot?.position ?? 0,
      });
    }),
    proof: unary<ProofRequest, ProofResponse>('Proof', StateAccess.Read, async (request) => {
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
    verify: unary<VerifyRequest, VerifyResponse>(
      'Verify',
      StateAccess.Read,
      async (request, { signal, log }) => {
        let result;
        try {
          result = await store.verify(request.partition, {
            signal,
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
        };
      },
    ),
    export: streaming<ExportRequest, ExportItem>(
      'Export',
      StateAccess.Read,
      (request, { signal }) => exportItems(request.partition, signal),
    ),
    listPartitions: unary<ListPartitionsRequest, ListPartitionsResponse>(
      'ListPartitions',
      StateAccess.Read,
      () => Promise.resolve({ partitions: store.listPartitions().map((p) => p.partition) }),
    ),
  };
}
