/**
 * Mints a namespace's harness certificate (`polychrome-harness-tls`) from the harness CA the
 * plan chose: ECDSA P-256, server auth, DNS name `polychrome-harness.<namespace>`, valid for
 * the leaf lifetime. Key generation is its only side effect; the key goes into the returned
 * Secret and nowhere else.
 */
import type { Lifetimes } from '../provision/catalog';
import { mintLeaf } from '../provision/x509-mint';
import { harnessLeafSubject, harnessTlsSecret, type Manifest } from './desired';
import type { IssueFrom } from './plan';

/** The `polychrome-harness-tls` Secret of `namespace`, issued at `now` from `from`. */
export function issueHarnessTls(
  namespace: string,
  from: IssueFrom,
  now: Date,
  lifetimes: Lifetimes,
): Manifest {
  const leaf = mintLeaf(
    {
      ...harnessLeafSubject(namespace),
      notBefore: now,
      notAfter: new Date(now.getTime() + lifetimes.leafMs),
    },
    'server',
    from.signer,
  );
  return harnessTlsSecret(namespace, leaf, from.bundle);
}
