import { createHash, hash } from 'node:crypto';

import type { Sha256 } from './sha256';

/**
 * SHA-256 through node:crypto, the server's hot path. The one-shot `crypto.hash` (Node
 * 20.12+) costs about half of a `createHash` object per call, which is most of the cost for
 * small journal events; older runtimes fall back to `createHash`.
 *
 * The digest comes back as a `binary` (latin1: one character per byte) string and is copied
 * into a Buffer from Node's shared pool: asking `crypto.hash` for a Buffer gives every
 * 32-byte digest an ArrayBuffer of its own, whose allocation and garbage collection cost
 * twice the hash itself when a journal replay makes hundreds of thousands of them.
 */
export const nodeSha256: Sha256 =
  typeof hash === 'function'
    ? (data) => Buffer.from(hash('sha256', data, 'binary'), 'binary')
    : (data) => createHash('sha256').update(data).digest();
