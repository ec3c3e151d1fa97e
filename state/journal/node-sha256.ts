import { createHash, hash } from 'node:crypto';

import { DIGEST_BYTES, type Sha256 } from './sha256';

/**
 * SHA-256 through node:crypto, the server's hot path. The one-shot `crypto.hash` (Node
 * 20.12+) costs about half of a `createHash` object per call, which is most of the cost for
 * small journal events; older runtimes fall back to `createHash`.
 *
 * The digest comes back as a `binary` (latin1: one character per byte) string and is
 * copied into a plain 32-byte Uint8Array, which V8 keeps on its heap. Asking `crypto.hash`
 * for a Buffer instead gives every digest an ArrayBuffer of its own, whose allocation and
 * garbage collection cost more than the hash itself when a replay makes hundreds of
 * thousands of them; a view into Node's shared Buffer pool would be as cheap, but every
 * digest kept (an MMR peak held for a partition) would keep its whole 8 KiB slab alive.
 */
export const nodeSha256: Sha256 =
  typeof hash === 'function'
    ? (data) => {
        const text = hash('sha256', data, 'binary');
        const digest = new Uint8Array(DIGEST_BYTES);
        for (let i = 0; i < DIGEST_BYTES; i++) digest[i] = text.charCodeAt(i);
        return digest;
      }
    : (data) => createHash('sha256').update(data).digest();
