import { createHash, hash } from 'node:crypto';

import type { Sha256 } from './sha256';

/**
 * SHA-256 through node:crypto, the server's hot path. The one-shot `crypto.hash` (Node
 * 20.12+) costs about half of a `createHash` object per call, which is most of the cost for
 * small journal events; older runtimes fall back to `createHash`.
 */
export const nodeSha256: Sha256 =
  typeof hash === 'function'
    ? (data) => hash('sha256', data, 'buffer')
    : (data) => createHash('sha256').update(data).digest();
