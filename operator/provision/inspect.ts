/**
 * What is wrong with a Secret's content, if anything: parsing and checking only, no I/O.
 * Each check answers a sentence naming the key and the fault, or undefined when the content
 * is valid; plan.ts adds the Secret's name and what to do.
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';

import type { LeafSpec } from './catalog';

/** A Secret's `data`, decoded. */
export type SecretData = Readonly<Record<string, Buffer>>;

/** The certificates of a PEM bundle, in order; throws on a block that does not parse. */
export function certificatesOf(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((block) => new X509Certificate(block));
}

/** A parsed CA Secret: the signing CA (when its key is there) and the trust bundle. */
export interface CaContent {
  /** The CA's certificate and key, PEM, when the Secret holds `tls.crt` and `tls.key`. */
  readonly signer?: { readonly certificate: string; readonly privateKey: string };
  readonly signerCertificate?: X509Certificate;
  /** `ca.crt` as parsed. */
  readonly bundle: readonly X509Certificate[];
}

const text = (data: SecretData, key: string): string | undefined => data[key]?.toString('utf8');

function keyOf(pem: string): KeyObject | string {
  try {
    return createPrivateKey(pem);
  } catch (error) {
    return `does not parse as a private key (${(error as Error).message})`;
  }
}

/** The problem of a certificate-and-key pair under `tls.crt`/`tls.key`, or the parsed pair. */
function pairOf(
  data: SecretData,
): string | { certificate: X509Certificate; pem: string; key: string } {
  const pem = text(data, 'tls.crt');
  const key = text(data, 'tls.key');
  if (pem === undefined || key === undefined) return 'has no tls.crt and tls.key';
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(pem);
  } catch (error) {
    return `tls.crt is not a PEM certificate (${(error as Error).message})`;
  }
  const parsed = keyOf(key);
  if (typeof parsed === 'string') return `tls.key ${parsed}`;
  if (!certificate.checkPrivateKey(parsed)) return 'tls.key is not the key of tls.crt';
  return { certificate, pem, key };
}

function bundleOf(data: SecretData): X509Certificate[] | string {
  const pem = text(data, 'ca.crt');
  if (pem === undefined) return 'has no ca.crt';
  try {
    const bundle = certificatesOf(pem);
    return bundle.length > 0 ? bundle : 'ca.crt holds no PEM certificate';
  } catch (error) {
    return `ca.crt does not parse (${(error as Error).message})`;
  }
}

/** Why `certificate` is not valid at `now`, or undefined. */
export function validityProblem(certificate: X509Certificate, now: Date): string | undefined {
  if (now < new Date(certificate.validFrom)) return `is not valid before ${certificate.validFrom}`;
  if (now >= new Date(certificate.validTo)) return `expired on ${certificate.validTo}`;
  return undefined;
}

/**
 * A CA Secret: `ca.crt` of CA certificates; `tls.crt` and `tls.key`, when present (they
 * must be, to issue), a valid CA pair whose certificate `ca.crt` holds.
 */
export function inspectCa(data: SecretData, now: Date, needKey: boolean): CaContent | string {
  const bundle = bundleOf(data);
  if (typeof bundle === 'string') return bundle;
  const notCa = bundle.find((c) => !c.ca);
  if (notCa !== undefined)
    return `ca.crt holds ${notCa.subject.replace(/\n/g, ', ')}, which is not a CA`;
  if (data['tls.crt'] === undefined && data['tls.key'] === undefined && !needKey) return { bundle };
  const pair = pairOf(data);
  if (typeof pair === 'string') return needKey ? `${pair}, so nothing can be issued from it` : pair;
  if (!pair.certificate.ca) return 'tls.crt is not a CA certificate';
  const expired = validityProblem(pair.certificate, now);
  if (expired !== undefined) return `tls.crt (the CA) ${expired}`;
  if (!bundle.some((c) => c.fingerprint256 === pair.certificate.fingerprint256)) {
    return 'ca.crt does not hold the CA of tls.crt';
  }
  return {
    signer: { certificate: pair.pem, privateKey: pair.key },
    signerCertificate: pair.certificate,
    bundle,
  };
}

/** The parsed leaf Secret. */
export interface LeafContent {
  readonly certificate: X509Certificate;
  readonly bundle: readonly X509Certificate[];
}

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

/** Why the certificate does not hold what `spec` asks of it, or undefined. */
function subjectProblem(certificate: X509Certificate, spec: LeafRequirements): string | undefined {
  const usages = certificate.keyUsage ?? [];
  const wanted = { server: [SERVER_AUTH], client: [CLIENT_AUTH], both: [SERVER_AUTH, CLIENT_AUTH] }[
    spec.usage
  ];
  if (!wanted.every((oid) => usages.includes(oid))) {
    return `tls.crt's extended key usages (${usages.join(', ') || 'none'}) lack ${wanted.join(' and ')} (${spec.usage} auth)`;
  }
  const missingName = spec.requiredDnsNames.find(
    (n) => certificate.checkHost(n, { subject: 'never' }) === undefined,
  );
  if (missingName !== undefined) {
    return `tls.crt names ${certificate.subjectAltName ?? 'no subject alternative name'}, not DNS:${missingName}`;
  }
  const organizations = certificate.subject
    .split('\n')
    .filter((line) => line.startsWith('O='))
    .map((line) => line.slice(2));
  const missingRoles = spec.organizations.filter((o) => !organizations.includes(o));
  if (missingRoles.length > 0) return `tls.crt's subject lacks O ${missingRoles.join(', O ')}`;
  return undefined;
}

/** What a leaf must hold: its extended key usages, DNS names and subject O values. */
export type LeafRequirements = Pick<LeafSpec, 'usage' | 'requiredDnsNames' | 'organizations'>;

/** A leaf Secret: a valid pair for `spec`, and a `ca.crt` one of whose CAs signed it. */
export function inspectLeaf(
  data: SecretData,
  spec: LeafRequirements,
  now: Date,
): LeafContent | string {
  const pair = pairOf(data);
  if (typeof pair === 'string') return pair;
  const expired = validityProblem(pair.certificate, now);
  if (expired !== undefined) return `tls.crt ${expired}`;
  const subject = subjectProblem(pair.certificate, spec);
  if (subject !== undefined) return subject;
  const bundle = bundleOf(data);
  if (typeof bundle === 'string') return bundle;
  if (!bundle.some((ca) => signedBy(pair.certificate, ca))) {
    return 'tls.crt is not signed by a CA in ca.crt';
  }
  return { certificate: pair.certificate, bundle };
}

/** True when `ca` issued `certificate` (names and signature). */
export function signedBy(certificate: X509Certificate, ca: X509Certificate): boolean {
  return certificate.checkIssued(ca) && certificate.verify(ca.publicKey);
}

/** Why `data[key]` is not an ed25519 private key (PKCS#8 PEM, or a raw 32-byte seed), or undefined. */
export function ed25519Problem(data: SecretData, key: string): string | undefined {
  const bytes = data[key];
  if (bytes === undefined) return `has no ${key}`;
  if (bytes.length === 32) return undefined;
  const parsed = keyOf(bytes.toString('utf8'));
  if (typeof parsed === 'string') return `${key} ${parsed}`;
  if (parsed.asymmetricKeyType !== 'ed25519') {
    return `${key} is a ${String(parsed.asymmetricKeyType)} key, not ed25519`;
  }
  return undefined;
}

/** Why `data['records-key']` is not 32 bytes (raw, 64 hex digits or base64), or undefined. */
export function recordsKeyProblem(data: SecretData): string | undefined {
  const bytes = data['records-key'];
  if (bytes === undefined) return 'has no records-key';
  if (bytes.length === 32) return undefined;
  const value = bytes.toString('latin1').replace(/\r?\n$/, '');
  if (/^[0-9a-fA-F]{64}$/.test(value)) return undefined;
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(value) && Buffer.from(value, 'base64').length === 32) {
    return undefined;
  }
  return `records-key holds ${bytes.length} bytes that are not a 32-byte key (raw, 64 hex digits or base64)`;
}
