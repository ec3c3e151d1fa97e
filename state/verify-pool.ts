import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

import { AppError } from '../common/errors';
import type { SignatureCheck } from './journal/verification-types';

// The worker is plain JavaScript evaluated from a string, so it needs no TypeScript loader
// or build step and runs the same under jest, tsx and the compiled server. It mirrors
// journal/node-ed25519.ts: wrap the raw key in its SPKI header, cache KeyObjects by key.
// A chunk arrives as one transferred ArrayBuffer (see packChecks) and its results go back
// as one transferred byte per check, so no check is copied by structured clone.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createPublicKey, verify } = require('node:crypto');
const spki = Buffer.from('302a300506032b6570032100', 'hex');
const keys = new Map();
parentPort.on('message', ({ id, count, packed }) => {
  const view = new DataView(packed);
  const out = new Uint8Array(count);
  let at = 0;
  for (let i = 0; i < count; i++) {
    const keyLength = view.getUint32(at);
    const messageLength = view.getUint32(at + 4);
    const signatureLength = view.getUint32(at + 8);
    const publicKey = Buffer.from(packed, at + 12, keyLength);
    const message = Buffer.from(packed, at + 12 + keyLength, messageLength);
    const signature = Buffer.from(packed, at + 12 + keyLength + messageLength, signatureLength);
    at += 12 + keyLength + messageLength + signatureLength;
    try {
      const hex = publicKey.toString('hex');
      let key = keys.get(hex);
      if (key === undefined) {
        key = createPublicKey({ key: Buffer.concat([spki, publicKey]), format: 'der', type: 'spki' });
        if (keys.size < 1024) keys.set(hex, key);
      }
      out[i] = verify(null, message, key, signature) ? 1 : 0;
    } catch {
      out[i] = 0;
    }
  }
  parentPort.postMessage({ id, out }, [out.buffer]);
});
`;

/** Bytes before each check in a packed chunk: key, message and signature lengths, u32 each. */
const CHECK_HEADER_BYTES = 12;

/**
 * Packs checks into one ArrayBuffer: per check, u32 big-endian lengths of the public key,
 * message and signature, then those bytes. One transfer per chunk replaces the structured
 * clone of three arrays per check.
 */
function packChecks(checks: readonly SignatureCheck[]): ArrayBuffer {
  let length = 0;
  for (const c of checks) {
    length += CHECK_HEADER_BYTES + c.publicKey.length + c.message.length + c.signature.length;
  }
  const packed = new ArrayBuffer(length);
  const view = new DataView(packed);
  const bytes = new Uint8Array(packed);
  let at = 0;
  for (const c of checks) {
    view.setUint32(at, c.publicKey.length);
    view.setUint32(at + 4, c.message.length);
    view.setUint32(at + 8, c.signature.length);
    at += CHECK_HEADER_BYTES;
    for (const part of [c.publicKey, c.message, c.signature]) {
      bytes.set(part, at);
      at += part.length;
    }
  }
  return packed;
}

/** A chunk of checks running on a worker. */
interface Job {
  readonly count: number;
  readonly resolve: (out: Uint8Array) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * One worker thread and the chunks posted to it, by id; `worker` is undefined once it died.
 * `checks` counts the checks of those chunks, to post the next chunk where the least work
 * waits.
 */
interface Slot {
  worker: Worker | undefined;
  readonly jobs: Map<number, Job>;
  checks: number;
}

function isReply(value: unknown): value is { id: number; out: Uint8Array } {
  return (
    typeof value === 'object' &&
    value !== null &&
    'id' in value &&
    typeof value.id === 'number' &&
    'out' in value &&
    value.out instanceof Uint8Array
  );
}

/** Options for {@link SignatureVerifyPool}. */
export interface SignatureVerifyPoolOptions {
  /**
   * Worker threads to start.
   * @default availableParallelism() − 1, at least 1
   */
  readonly workers?: number;
  /**
   * Below this many checks, one chunk per call goes to one worker: thread hand-off costs
   * more than it saves for a handful of signatures.
   * @default 64
   */
  readonly minChunk?: number;
  /**
   * At most this many checks per chunk. Each chunk goes to the worker with the least work
   * waiting, so smaller chunks share a long call out more evenly.
   * @default 256
   */
  readonly maxChunk?: number;
}

/**
 * Runs a verification plan's ed25519 checks (`VerificationPlan.signatureChecks`) on worker
 * threads with node:crypto, so verifying a long journal uses every core while the caller's
 * thread hashes. Results come back in check order, ready for
 * `concludeJournalVerification`. Calls may overlap: a replay can send each chunk of checks
 * as soon as it has collected it. Workers start on construction; call {@link close}.
 */
export class SignatureVerifyPool {
  private readonly slots: Slot[];
  private readonly minChunk: number;
  private readonly maxChunk: number;
  private nextId = 0;
  private closed = false;

  constructor(options: SignatureVerifyPoolOptions = {}) {
    const count = options.workers ?? Math.max(1, availableParallelism() - 1);
    if (!Number.isInteger(count) || count < 1) {
      throw new AppError(
        'invalid_argument',
        `workers must be a positive integer, got ${String(count)}`,
      );
    }
    this.minChunk = options.minChunk ?? 64;
    this.maxChunk = Math.max(this.minChunk, options.maxChunk ?? 256);
    this.slots = Array.from({ length: count }, () => ({
      worker: undefined,
      jobs: new Map(),
      checks: 0,
    }));
    for (const slot of this.slots) slot.worker = this.startWorker(slot);
  }

  private startWorker(slot: Slot): Worker {
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    worker.on('message', (message: unknown) => {
      if (!isReply(message)) return;
      const job = slot.jobs.get(message.id);
      if (job === undefined) return;
      slot.jobs.delete(message.id);
      slot.checks -= job.count;
      job.resolve(message.out);
    });
    worker.on('error', (error) => this.lose(slot, worker, error));
    worker.on('exit', (code) => this.lose(slot, worker, new Error(`exit code ${String(code)}`)));
    return worker;
  }

  /**
   * A worker died: the chunks it held fail with a clear error. A new worker takes its
   * place when the next chunk comes.
   */
  private lose(slot: Slot, worker: Worker, cause: unknown): void {
    if (slot.worker !== worker) return;
    slot.worker = undefined;
    this.failJobs(
      slot,
      new AppError('internal', 'a signature worker failed; verify again or verify on one thread', {
        cause,
      }),
    );
  }

  private failJobs(slot: Slot, error: AppError): void {
    const jobs = [...slot.jobs.values()];
    slot.jobs.clear();
    slot.checks = 0;
    for (const job of jobs) job.reject(error);
  }

  /** Posts one chunk to the worker with the fewest checks waiting. */
  private post(checks: readonly SignatureCheck[]): Promise<Uint8Array> {
    const slot = this.slots.reduce((least, s) => (s.checks < least.checks ? s : least));
    const worker = (slot.worker ??= this.startWorker(slot));
    const id = this.nextId++;
    const packed = packChecks(checks);
    return new Promise<Uint8Array>((resolve, reject) => {
      slot.jobs.set(id, { count: checks.length, resolve, reject });
      slot.checks += checks.length;
      worker.postMessage({ id, count: checks.length, packed }, [packed]);
    });
  }

  /**
   * Checks every signature; `result[i]` is the outcome of `checks[i]`. The checks go out
   * at once, in chunks, each to the worker with the least work waiting; calls may overlap.
   *
   * @throws AppError `failed_precondition` after {@link close}; `internal` if a worker dies.
   */
  async verify(checks: readonly SignatureCheck[]): Promise<boolean[]> {
    if (this.closed) {
      throw new AppError('failed_precondition', 'the signature pool is closed; create a new one');
    }
    const chunkSize = Math.min(
      this.maxChunk,
      Math.max(this.minChunk, Math.ceil(checks.length / this.slots.length)),
    );
    const parts: Promise<Uint8Array>[] = [];
    for (let start = 0; start < checks.length; start += chunkSize) {
      parts.push(this.post(checks.slice(start, start + chunkSize)));
    }
    const results = await Promise.all(parts);
    return results.flatMap((out) => Array.from(out, (v) => v === 1));
  }

  /** Stops the workers; pending calls fail. Safe to call more than once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const error = new AppError('internal', 'the signature pool was closed while checks ran');
    for (const slot of this.slots) this.failJobs(slot, error);
    await Promise.all(
      this.slots.flatMap((s) => (s.worker === undefined ? [] : [s.worker.terminate()])),
    );
  }
}
