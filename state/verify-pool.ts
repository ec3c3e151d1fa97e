import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

import { AppError } from '../common/errors';
import type { SignatureCheck } from './journal/verify-journal';

// The worker is plain JavaScript evaluated from a string, so it needs no TypeScript loader
// or build step and runs the same under jest, tsx and the compiled server. It mirrors
// journal/node-ed25519.ts: wrap the raw key in its SPKI header, cache KeyObjects by key.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createPublicKey, verify } = require('node:crypto');
const spki = Buffer.from('302a300506032b6570032100', 'hex');
const keys = new Map();
parentPort.on('message', ({ id, checks }) => {
  const out = new Uint8Array(checks.length);
  for (let i = 0; i < checks.length; i++) {
    const c = checks[i];
    try {
      const hex = Buffer.from(c.publicKey).toString('hex');
      let key = keys.get(hex);
      if (key === undefined) {
        key = createPublicKey({ key: Buffer.concat([spki, c.publicKey]), format: 'der', type: 'spki' });
        if (keys.size < 1024) keys.set(hex, key);
      }
      out[i] = verify(null, c.message, key, c.signature) ? 1 : 0;
    } catch {
      out[i] = 0;
    }
  }
  parentPort.postMessage({ id, out });
});
`;

interface Pending {
  readonly resolve: (out: Uint8Array) => void;
  readonly reject: (error: unknown) => void;
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
}

/**
 * Runs a verification plan's ed25519 checks (`VerificationPlan.signatureChecks`) on worker
 * threads with node:crypto, so verifying a long journal uses every core while the caller's
 * thread hashes. Results come back in check order, ready for
 * `concludeJournalVerification`. Workers start on construction; call {@link close}.
 */
export class SignatureVerifyPool {
  private readonly workers: Worker[];
  private readonly pending = new Map<number, Pending>();
  private readonly minChunk: number;
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
    this.workers = Array.from({ length: count }, () => this.startWorker());
  }

  private startWorker(): Worker {
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    worker.on('message', (message: unknown) => {
      if (!isReply(message)) return;
      this.pending.get(message.id)?.resolve(message.out);
      this.pending.delete(message.id);
    });
    worker.on('error', (error) => this.failAll(error));
    return worker;
  }

  private failAll(cause: unknown): void {
    for (const p of this.pending.values()) {
      p.reject(
        new AppError(
          'internal',
          'a signature worker failed; verify again or verify on one thread',
          { cause },
        ),
      );
    }
    this.pending.clear();
  }

  /**
   * Checks every signature; `result[i]` is the outcome of `checks[i]`.
   *
   * @throws AppError `failed_precondition` after {@link close}; `internal` if a worker dies.
   */
  async verify(checks: readonly SignatureCheck[]): Promise<boolean[]> {
    if (this.closed) {
      throw new AppError('failed_precondition', 'the signature pool is closed; create a new one');
    }
    const chunkSize = Math.max(this.minChunk, Math.ceil(checks.length / this.workers.length));
    const jobs: Promise<Uint8Array>[] = [];
    for (let start = 0, w = 0; start < checks.length; start += chunkSize, w++) {
      const worker = this.workers[w % this.workers.length];
      if (worker === undefined) throw new Error('unreachable: the pool has workers');
      const id = this.nextId++;
      const chunk = checks.slice(start, start + chunkSize).map((c) => ({
        publicKey: c.publicKey,
        message: c.message,
        signature: c.signature,
      }));
      jobs.push(
        new Promise<Uint8Array>((resolve, reject) => {
          this.pending.set(id, { resolve, reject });
          worker.postMessage({ id, checks: chunk });
        }),
      );
    }
    const parts = await Promise.all(jobs);
    return parts.flatMap((out) => Array.from(out, (v) => v === 1));
  }

  /** Stops the workers; pending calls fail. Safe to call more than once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.failAll(new Error('pool closed'));
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
