import { generateKeyPairSync, randomBytes, X509Certificate } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import {
  CertUsage,
  DevCertificateAuthority,
  exists,
  type CertFiles,
  type CertRequest,
} from './pki';
import { repoRoot } from './paths';

/**
 * Development certificates for the state plane's mutual TLS, a development journal
 * signing key and a development records key. One CA signs the state server's certificate
 * and the client identities the state plane knows, each with exactly the roles its user
 * needs (docs/state-plane.md, "Identities and roles"). Throwaway material
 * for a laptop or a test; a cluster gets its certificates from its own issuer.
 */

/** Where `npx tsx hack/lib/dev-certs.ts` writes by default. */
export const DEFAULT_DEV_CERTS_DIR = join(repoRoot, '.local', 'state-pki');

/** DNS names and addresses the dev server certificate is valid for. */
export const STATE_SERVER_DNS_NAMES: readonly string[] = [
  'localhost',
  'polychrome-state',
  'polychrome-state.polychrome-system',
  'polychrome-state.polychrome-system.svc',
  'polychrome-state.polychrome-system.svc.cluster.local',
  // The StatefulSet's pod behind the headless Service.
  'polychrome-state-0.polychrome-state-headless.polychrome-system.svc',
];
export const STATE_SERVER_IP_ADDRESSES: readonly string[] = ['127.0.0.1', '::1'];

/** Paths of everything {@link ensureDevCerts} writes. */
export interface DevCerts {
  readonly dir: string;
  /** The Polychrome dev CA (trust anchor for both sides). */
  readonly ca: CertFiles;
  /** The state plane's server certificate. */
  readonly server: CertFiles;
  /**
   * CN polychrome-control-plane, O polychrome:writer, polychrome:repair, polychrome:erase,
   * polychrome:retire and polychrome:control-plane-replica: journals, the records its code
   * uses, repair, erasure, journal retention, and the peer port; client and server auth,
   * since replicas also present it to each other on
   * their peer listeners.
   */
  readonly controlPlane: CertFiles;
  /** CN polychrome-verifier, O polychrome:verifier: journal reads only. */
  readonly verifier: CertFiles;
  /**
   * CN polychrome-records-admin, O polychrome:records-admin: every Records RPC, no journal;
   * the development tooling that mints tokens (dev-token.ts) uses it.
   */
  readonly recordsAdmin: CertFiles;
  /**
   * CN polychrome-backup, O polychrome:backup: the state plane's Backup RPC only
   * (`polychrome state backup`, docs/operations.md, "Backup and restore").
   */
  readonly backup: CertFiles;
  /** The journal signing key, PKCS#8 PEM (ed25519), as state/store/signing-key.ts loads. */
  readonly signingKey: string;
  /** The records key: 64 hex digits (32 random bytes), as state/records/records-key.ts loads. */
  readonly recordsKey: string;
}

const CA_NAME = 'ca';

type LeafField = 'server' | 'controlPlane' | 'verifier' | 'recordsAdmin' | 'backup';

const LEAVES: readonly (CertRequest & { readonly field: LeafField })[] = [
  {
    field: 'server',
    name: 'state-server',
    commonName: 'polychrome-state',
    dnsNames: STATE_SERVER_DNS_NAMES,
    ipAddresses: STATE_SERVER_IP_ADDRESSES,
    usage: CertUsage.Server,
  },
  {
    field: 'controlPlane',
    name: 'control-plane',
    commonName: 'polychrome-control-plane',
    organizations: [
      'polychrome:writer',
      'polychrome:repair',
      'polychrome:erase',
      'polychrome:retire',
      'polychrome:control-plane-replica',
    ],
    // Also served: each replica's peer listener presents it to the others.
    usage: CertUsage.Both,
  },
  {
    field: 'verifier',
    name: 'verifier',
    commonName: 'polychrome-verifier',
    organizations: ['polychrome:verifier'],
    usage: CertUsage.Client,
  },
  {
    field: 'recordsAdmin',
    name: 'records-admin',
    commonName: 'polychrome-records-admin',
    organizations: ['polychrome:records-admin'],
    usage: CertUsage.Client,
  },
  {
    field: 'backup',
    name: 'backup',
    commonName: 'polychrome-backup',
    organizations: ['polychrome:backup'],
    usage: CertUsage.Client,
  },
];

/** Extended key usage OIDs a {@link CertUsage} asks for. */
const USAGE_OIDS: Record<CertUsage, readonly string[]> = {
  server: ['1.3.6.1.5.5.7.3.1'],
  client: ['1.3.6.1.5.5.7.3.2'],
  both: ['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2'],
};

/**
 * True when the certificate at `path` has every extended key usage `usage` needs and
 * exactly the organizations (roles) asked for: a directory made before the control-plane
 * certificate became a server certificate, or before a role was added, gets it issued again.
 */
async function isCurrent(path: string, request: CertRequest): Promise<boolean> {
  try {
    const certificate = new X509Certificate(await readFile(path));
    const have = certificate.keyUsage ?? [];
    const organizations = certificate.subject
      .split('\n')
      .filter((line) => line.startsWith('O='))
      .map((line) => line.slice(2));
    return (
      USAGE_OIDS[request.usage].every((oid) => have.includes(oid)) &&
      [...organizations].sort().join() === [...(request.organizations ?? [])].sort().join()
    );
  } catch {
    return false;
  }
}

/**
 * Makes sure `dir` holds the dev CA, the state server certificate, the control-plane and
 * verifier client certificates, a signing key and a records key. Idempotent: files already there are
 * reused; only missing ones are made. When the CA itself is missing every certificate is
 * issued again, since certificates from a lost CA would no longer verify.
 *
 * @throws Error when `openssl` is missing or fails, or `dir` is not writable.
 */
export async function ensureDevCerts(dir: string = DEFAULT_DEV_CERTS_DIR): Promise<DevCerts> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  let ca = DevCertificateAuthority.open(dir, CA_NAME);
  const freshCa = !(await exists(ca.certPath)) || !(await exists(ca.keyPath));
  if (freshCa) ca = await DevCertificateAuthority.create(dir, CA_NAME, 'Polychrome dev CA');
  const issued: Partial<Record<LeafField, CertFiles>> = {};
  for (const { field, ...request } of LEAVES) {
    const files = {
      certPath: join(dir, `${request.name}.crt`),
      keyPath: join(dir, `${request.name}.key`),
    };
    const present =
      (await exists(files.certPath)) &&
      (await exists(files.keyPath)) &&
      (await isCurrent(files.certPath, request));
    issued[field] = present && !freshCa ? files : await ca.issue(request);
  }
  const signingKey = join(dir, 'signing-key.pem');
  if (!(await exists(signingKey))) {
    const { privateKey } = generateKeyPairSync('ed25519');
    await writeFile(signingKey, privateKey.export({ format: 'pem', type: 'pkcs8' }), {
      mode: 0o600,
    });
  }
  const recordsKey = join(dir, 'records-key');
  if (!(await exists(recordsKey))) {
    await writeFile(recordsKey, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  }
  const { server, controlPlane, verifier, recordsAdmin, backup } = issued;
  if (
    server === undefined ||
    controlPlane === undefined ||
    verifier === undefined ||
    recordsAdmin === undefined ||
    backup === undefined
  ) {
    throw new Error('unreachable: every leaf was issued or found');
  }
  return {
    dir,
    ca: { certPath: ca.certPath, keyPath: ca.keyPath },
    server,
    controlPlane,
    verifier,
    recordsAdmin,
    backup,
    signingKey,
    recordsKey,
  };
}

/**
 * The environment that runs state/main.ts with `certs` and `dataDir` (the records go to
 * the default `<dataDir>-records`).
 */
export function devStateEnv(certs: DevCerts, dataDir: string): Record<string, string> {
  return {
    STATE_TLS_CA_FILE: certs.ca.certPath,
    STATE_TLS_CERT_FILE: certs.server.certPath,
    STATE_TLS_KEY_FILE: certs.server.keyPath,
    STATE_SIGNING_KEY_FILE: certs.signingKey,
    STATE_DATA_DIR: dataDir,
    STATE_RECORDS_KEY_FILE: certs.recordsKey,
  };
}

/**
 * The environment that links the control plane (operator/main.ts) to the state plane at
 * `address` as the control-plane identity.
 */
export function devControlPlaneEnv(certs: DevCerts, address: string): Record<string, string> {
  return {
    POLYCHROME_STATE_ADDRESS: address,
    POLYCHROME_STATE_CA: certs.ca.certPath,
    POLYCHROME_STATE_CERT: certs.controlPlane.certPath,
    POLYCHROME_STATE_KEY: certs.controlPlane.keyPath,
  };
}

/** The environment that points the CLI at the state plane as the verifier identity. */
export function devCliEnv(certs: DevCerts, address: string): Record<string, string> {
  return {
    POLYCHROME_STATE_ADDRESS: address,
    POLYCHROME_STATE_CA: certs.ca.certPath,
    POLYCHROME_STATE_CERT: certs.verifier.certPath,
    POLYCHROME_STATE_KEY: certs.verifier.keyPath,
  };
}

if (require.main === module) {
  const dir = process.argv[2] ?? DEFAULT_DEV_CERTS_DIR;
  ensureDevCerts(dir).then(
    (certs) => {
      const env = {
        ...devStateEnv(certs, join(dir, '..', 'state-data')),
        ...devCliEnv(certs, 'localhost:7443'),
      };
      for (const [name, value] of Object.entries(env)) console.log(`export ${name}=${value}`);
    },
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : String(error));
      process.exit(1);
    },
  );
}
