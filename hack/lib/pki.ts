import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { access, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A certificate and its private key on disk (PEM). */
export interface CertFiles {
  certPath: string;
  keyPath: string;
}

/** What a leaf certificate is for; clients get clientAuth, servers serverAuth. */
export const CertUsage = { Server: 'server', Client: 'client', Both: 'both' } as const;
export type CertUsage = (typeof CertUsage)[keyof typeof CertUsage];

/** The subject and extensions of a leaf certificate. */
export interface CertRequest {
  /** File name stem inside the directory: `<name>.crt`, `<name>.key`. */
  name: string;
  commonName: string;
  /** Subject O values; Kubernetes reads them as groups (e.g. `system:masters`). */
  organizations?: readonly string[];
  dnsNames?: readonly string[];
  ipAddresses?: readonly string[];
  usage: CertUsage;
  /** @default 365 */
  days?: number;
}

async function openssl(args: readonly string[]): Promise<void> {
  try {
    await run('openssl', args, { maxBuffer: 1 << 20 });
  } catch (err: unknown) {
    const stderr = err instanceof Error && 'stderr' in err ? String(err.stderr) : '';
    throw new Error(`openssl ${args[0] ?? ''} failed: ${stderr.trim() || String(err)}`, {
      cause: err,
    });
  }
}

function subject(commonName: string, organizations: readonly string[] = []): string {
  const escape = (v: string): string => v.replace(/[/\\]/g, (c) => `\\${c}`);
  return `/CN=${escape(commonName)}${organizations.map((o) => `/O=${escape(o)}`).join('')}`;
}

/**
 * Development PKI on top of the `openssl` command: throwaway CAs and the leaf certificates
 * signed by them (ECDSA P-256). For local clusters and tests only; production certificates
 * come from the cluster's own issuer.
 */
export class DevCertificateAuthority implements CertFiles {
  private constructor(
    readonly dir: string,
    readonly certPath: string,
    readonly keyPath: string,
  ) {}

  /** Creates a self-signed CA in `dir` as `<name>.crt` / `<name>.key`, valid for `days` (ten years). */
  static async create(
    dir: string,
    name: string,
    commonName: string,
    days = 3650,
  ): Promise<DevCertificateAuthority> {
    await mkdir(dir, { recursive: true });
    const ca = new DevCertificateAuthority(dir, join(dir, `${name}.crt`), join(dir, `${name}.key`));
    await openssl([
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      ca.keyPath,
      '-out',
      ca.certPath,
      '-days',
      String(days),
      '-subj',
      subject(commonName),
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    return ca;
  }

  /** Opens a CA created earlier by {@link DevCertificateAuthority.create}. */
  static open(dir: string, name: string): DevCertificateAuthority {
    return new DevCertificateAuthority(dir, join(dir, `${name}.crt`), join(dir, `${name}.key`));
  }

  /** Issues a leaf certificate signed by this CA. */
  async issue(req: CertRequest, dir: string = this.dir): Promise<CertFiles> {
    await mkdir(dir, { recursive: true });
    const out = { certPath: join(dir, `${req.name}.crt`), keyPath: join(dir, `${req.name}.key`) };
    const csrPath = join(dir, `${req.name}.csr`);
    const extPath = join(dir, `${req.name}.ext`);
    const usage = { server: 'serverAuth', client: 'clientAuth', both: 'serverAuth,clientAuth' };
    const sans = [
      ...(req.dnsNames ?? []).map((d) => `DNS:${d}`),
      ...(req.ipAddresses ?? []).map((ip) => `IP:${ip}`),
    ];
    const ext = [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      `extendedKeyUsage=${usage[req.usage]}`,
      ...(sans.length > 0 ? [`subjectAltName=${sans.join(',')}`] : []),
    ];
    await writeFile(extPath, ext.join('\n') + '\n');
    await openssl([
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      out.keyPath,
      '-out',
      csrPath,
      '-subj',
      subject(req.commonName, req.organizations),
    ]);
    await openssl([
      'x509',
      '-req',
      '-in',
      csrPath,
      '-CA',
      this.certPath,
      '-CAkey',
      this.keyPath,
      '-set_serial',
      `0x${randomBytes(16).toString('hex')}`,
      '-days',
      String(req.days ?? 365),
      '-extfile',
      extPath,
      '-out',
      out.certPath,
    ]);
    await Promise.all([rm(csrPath), rm(extPath)]);
    return out;
  }
}

/** Writes an EC P-256 key pair (PKCS#8 private, SPKI public) for service-account tokens. */
export async function createSigningKeyPair(
  dir: string,
  name: string,
): Promise<CertFiles & { publicKeyPath: string }> {
  await mkdir(dir, { recursive: true });
  const keyPath = join(dir, `${name}.key`);
  const publicKeyPath = join(dir, `${name}.pub`);
  await openssl([
    'genpkey',
    '-algorithm',
    'EC',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-out',
    keyPath,
  ]);
  await openssl(['pkey', '-in', keyPath, '-pubout', '-out', publicKeyPath]);
  return { certPath: publicKeyPath, keyPath, publicKeyPath };
}

/** True when `path` exists: key material made by an earlier run is reused. */
export async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** Reads a PEM file as base64 of its bytes, the form kubeconfig `*-data` fields take. */
export async function pemAsBase64(path: string): Promise<string> {
  return (await readFile(path)).toString('base64');
}
