/**
 * Certificates made with node:crypto alone (no openssl in the image, no X.509 library among
 * the production dependencies): ECDSA P-256 keys, SHA-256 signatures, X.509 v3 with the
 * extensions a Polychrome CA and its leaves need (RFC 5280). Key generation is the only
 * side effect; the bytes are laid out by der.ts.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  type KeyObject,
} from 'node:crypto';

import {
  bitString,
  boolean,
  explicit,
  ia5Implicit,
  implicit,
  namedBits,
  objectIdentifier,
  octetString,
  sequence,
  set,
  smallInteger,
  time,
  unsignedInteger,
  utf8String,
} from './der';

/** A certificate and its private key, both PEM. */
export interface MintedPair {
  readonly certificate: string;
  readonly privateKey: string;
}

/** What a leaf certificate is for: extended key usages server auth, client auth, or both. */
export type LeafUsage = 'server' | 'client' | 'both';

/** The subject and extensions of a certificate to mint. */
export interface MintRequest {
  readonly commonName: string;
  /** Subject O values (the state plane reads roles from them). */
  readonly organizations?: readonly string[];
  readonly dnsNames?: readonly string[];
  /** From when it is valid; a minute earlier is written, for clocks slightly behind. */
  readonly notBefore: Date;
  readonly notAfter: Date;
}

const OID = {
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extendedKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
} as const;

/** KeyUsage bit positions (RFC 5280, 4.2.1.3). */
const KEY_USAGE = { digitalSignature: 0, keyEncipherment: 2, keyCertSign: 5, cRLSign: 6 };

const SKEW_MS = 60_000;

function name(commonName: string, organizations: readonly string[] = []): Buffer {
  const rdn = (oid: string, value: string): Buffer =>
    set(sequence(objectIdentifier(oid), utf8String(value)));
  return sequence(
    ...organizations.map((o) => rdn(OID.organization, o)),
    rdn(OID.commonName, commonName),
  );
}

function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  return critical
    ? sequence(objectIdentifier(oid), boolean(true), octetString(value))
    : sequence(objectIdentifier(oid), octetString(value));
}

/** The key identifier of a public key: SHA-1 of its SubjectPublicKeyInfo's key bits. */
function keyIdentifier(publicKey: KeyObject): Buffer {
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  // P-256: the uncompressed point is the last 65 bytes of the SPKI.
  return createHash('sha1')
    .update(spki.subarray(spki.length - 65))
    .digest();
}

function signed(tbs: Buffer, issuerKey: KeyObject): string {
  const algorithm = sequence(objectIdentifier(OID.ecdsaWithSha256));
  const signature = sign('sha256', tbs, issuerKey);
  const der = sequence(tbs, algorithm, bitString(signature));
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
}

interface Issuer {
  readonly name: Buffer;
  readonly key: KeyObject;
  readonly keyId: Buffer;
}

function tbsCertificate(
  request: MintRequest,
  subjectKey: KeyObject,
  issuer: Issuer | undefined,
  extensions: readonly Buffer[],
): Buffer {
  const subject = name(request.commonName, request.organizations);
  const serial = randomBytes(16);
  serial[0] = ((serial[0] ?? 0) & 0x7f) | 0x40;
  const subjectKeyId = keyIdentifier(subjectKey);
  return sequence(
    explicit(0, smallInteger(2)),
    unsignedInteger(serial),
    sequence(objectIdentifier(OID.ecdsaWithSha256)),
    issuer?.name ?? subject,
    sequence(time(new Date(request.notBefore.getTime() - SKEW_MS)), time(request.notAfter)),
    subject,
    subjectKey.export({ type: 'spki', format: 'der' }),
    explicit(
      3,
      sequence(
        ...extensions,
        extension(OID.subjectKeyIdentifier, false, octetString(subjectKeyId)),
        extension(
          OID.authorityKeyIdentifier,
          false,
          sequence(implicit(0, issuer?.keyId ?? subjectKeyId)),
        ),
      ),
    ),
  );
}

function newKeyPair(): { publicKey: KeyObject; privateKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' });
}

const pkcs8 = (key: KeyObject): string => key.export({ type: 'pkcs8', format: 'pem' }).toString();

/** A self-signed CA: basic constraints CA (critical), key usage certificate and CRL signing. */
export function mintCa(request: MintRequest): MintedPair {
  const { publicKey, privateKey } = newKeyPair();
  const tbs = tbsCertificate(request, publicKey, undefined, [
    extension(OID.basicConstraints, true, sequence(boolean(true))),
    extension(
      OID.keyUsage,
      true,
      namedBits([KEY_USAGE.digitalSignature, KEY_USAGE.keyCertSign, KEY_USAGE.cRLSign]),
    ),
  ]);
  return { certificate: signed(tbs, privateKey), privateKey: pkcs8(privateKey) };
}

/**
 * A leaf certificate signed by `ca`: not a CA, key usage digital signature and key
 * encipherment, the extended key usages `usage` asks for, and the DNS names as SANs.
 */
export function mintLeaf(request: MintRequest, usage: LeafUsage, ca: MintedPair): MintedPair {
  const caCertificate = createPublicKey(ca.certificate);
  const issuer: Issuer = {
    name: issuerNameOf(ca.certificate),
    key: createPrivateKey(ca.privateKey),
    keyId: keyIdentifier(caCertificate),
  };
  const purposes = {
    server: [OID.serverAuth],
    client: [OID.clientAuth],
    both: [OID.serverAuth, OID.clientAuth],
  }[usage];
  const dnsNames = request.dnsNames ?? [];
  const { publicKey, privateKey } = newKeyPair();
  const tbs = tbsCertificate(request, publicKey, issuer, [
    extension(OID.basicConstraints, true, sequence()),
    extension(
      OID.keyUsage,
      true,
      namedBits([KEY_USAGE.digitalSignature, KEY_USAGE.keyEncipherment]),
    ),
    extension(OID.extendedKeyUsage, false, sequence(...purposes.map(objectIdentifier))),
    ...(dnsNames.length > 0
      ? [extension(OID.subjectAltName, false, sequence(...dnsNames.map((d) => ia5Implicit(2, d))))]
      : []),
  ]);
  return { certificate: signed(tbs, issuer.key), privateKey: pkcs8(privateKey) };
}

/**
 * The subject Name of a CA certificate, as its DER bytes (the issuer of what it signs):
 * read from the certificate itself, so a CA minted elsewhere issues correctly too.
 */
function issuerNameOf(certificatePem: string): Buffer {
  const der = Buffer.from(
    certificatePem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''),
    'base64',
  );
  // Certificate SEQUENCE → TBSCertificate SEQUENCE → its fields in order.
  const tbs = children(children(der, 0)[0] ?? Buffer.alloc(0), 0);
  // [0] version, serial, signature algorithm, issuer, validity, subject.
  const subject = tbs[5];
  if (subject === undefined) throw new Error('the CA certificate has no subject');
  return subject;
}

/** The DER values inside the constructed value at `offset` of `der`. */
function children(der: Buffer, offset: number): Buffer[] {
  const { header, length } = lengthAt(der, offset);
  const out: Buffer[] = [];
  let at = offset + header;
  while (at < offset + header + length) {
    const child = lengthAt(der, at);
    out.push(der.subarray(at, at + child.header + child.length));
    at += child.header + child.length;
  }
  return out;
}

function lengthAt(der: Buffer, offset: number): { header: number; length: number } {
  const first = der[offset + 1] ?? 0;
  if (first < 0x80) return { header: 2, length: first };
  const count = first & 0x7f;
  let length = 0;
  for (let i = 0; i < count; i += 1) length = length * 256 + (der[offset + 2 + i] ?? 0);
  return { header: 2 + count, length };
}
