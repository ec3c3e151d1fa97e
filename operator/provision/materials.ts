/**
 * The content of a Secret the provisioner writes, from what plan.ts decided: new keys and
 * certificates (node:crypto), or data it carries over. The only place private keys are
 * made; they go into the returned data and nowhere else (never a log line).
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';

import { CA_COMMON_NAMES, type Lifetimes } from './catalog';
import type { Material } from './plan';
import { mintCa, mintLeaf } from './x509-mint';

/** A Secret's type and string data. */
export interface SecretContent {
  readonly type: 'kubernetes.io/tls' | 'Opaque';
  readonly data: Readonly<Record<string, string>>;
}

/** An ed25519 key pair: the private key as PKCS#8 PEM, the public key as 64 hex digits. */
function ed25519(): { privateKey: string; publicKeyHex: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    // The raw key is the last 32 bytes of the SubjectPublicKeyInfo.
    publicKeyHex: spki.subarray(spki.length - 32).toString('hex'),
  };
}

/** What to write for `material`, minted at `now`. */
export function contentOf(material: Material, now: Date, lifetimes: Lifetimes): SecretContent {
  switch (material.kind) {
    case 'ca': {
      const ca = mintCa({
        commonName: CA_COMMON_NAMES[material.name],
        notBefore: now,
        notAfter: new Date(now.getTime() + lifetimes.caMs),
      });
      // The new CA first: consumers that read only the first certificate see it.
      const bundle = [ca.certificate, ...material.keep].join('');
      return {
        type: 'kubernetes.io/tls',
        data: { 'ca.crt': bundle, 'tls.crt': ca.certificate, 'tls.key': ca.privateKey },
      };
    }
    case 'leaf': {
      const { spec } = material;
      const leaf = mintLeaf(
        {
          commonName: spec.commonName,
          organizations: spec.organizations,
          dnsNames: spec.dnsNames,
          notBefore: now,
          notAfter: new Date(now.getTime() + lifetimes.leafMs),
        },
        spec.usage,
        material.signer,
      );
      return {
        type: 'kubernetes.io/tls',
        data: {
          'ca.crt': material.bundle,
          'tls.crt': leaf.certificate,
          'tls.key': leaf.privateKey,
        },
      };
    }
    case 'data':
      return { type: 'kubernetes.io/tls', data: material.data };
    case 'signing-key':
      return { type: 'Opaque', data: { 'signing-key': ed25519().privateKey } };
    case 'approval-key': {
      const key = ed25519();
      return {
        type: 'Opaque',
        data: { 'key.pem': key.privateKey, 'public-key': key.publicKeyHex },
      };
    }
    case 'records-key':
      return { type: 'Opaque', data: { 'records-key': randomBytes(32).toString('hex') } };
  }
}
