/**
 * The state plane's client identities `make dev`'s own tooling uses on this machine: the
 * records administrator that mints the developer's session token (dev-token.ts) and the
 * verifier the printed `polychrome state verify` command runs as. Issued here from the state
 * CA the provisioner made (the Secret polychrome-state-ca of the base's namespace), as an
 * administrator of a cluster issues a certificate for a tool (docs/operator.md,
 * "Installing: what the operator provisions"; docs/state-plane.md, "Identities and
 * roles"). The CA's key is read through the API and used in memory only; the leaves are
 * files under `dir`, readable by their owner, never Secrets of the cluster.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import { SecretName } from '../../operator/provision/catalog';
import { mintLeaf, type MintRequest } from '../../operator/provision/x509-mint';

/** One identity's PEM files, as the CLI's POLYCHROME_STATE_CA, _CERT and _KEY name them. */
export interface StateClientFiles {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

/** The identities, and the name the state plane's certificate is checked against. */
export interface DevStateClients {
  /** CN polychrome-records-admin, O polychrome:records-admin: every Records RPC, no journal. */
  readonly recordsAdmin: StateClientFiles;
  /** CN polychrome-verifier, O polychrome:verifier: journal reads only. */
  readonly verifier: StateClientFiles;
  /**
   * `polychrome-state.<namespace>.svc`: the provisioner's server certificate names the
   * Service, not localhost, where the local node forwards the state plane's port.
   */
  readonly serverName: string;
}

/** How long an issued identity lives: `make dev` issues them again at every start. */
const CLIENT_LIFETIME_MS = 30 * 24 * 60 * 60 * 1000;

const IDENTITIES = {
  recordsAdmin: {
    commonName: 'polychrome-records-admin',
    organizations: ['polychrome:records-admin'],
  },
  verifier: { commonName: 'polychrome-verifier', organizations: ['polychrome:verifier'] },
} as const;

function text(data: Record<string, string> | undefined, key: string, secret: string): string {
  const value = data?.[key];
  if (value === undefined || value === '') {
    throw new Error(`dev: Secret ${secret} has no ${key}; is the provisioner running?`);
  }
  return Buffer.from(value, 'base64').toString('utf8');
}

/**
 * Issues both identities from the provisioner's state CA in `namespace` and writes them to
 * `dir` (created, mode 0700; keys 0600).
 *
 * @throws Error when the CA's Secret is absent or lacks a key.
 */
export async function issueDevStateClients(
  kc: KubeConfig,
  namespace: string,
  dir: string,
  now: Date = new Date(),
): Promise<DevStateClients> {
  const secret = await kc
    .makeApiClient(CoreV1Api)
    .readNamespacedSecret({ name: SecretName.StateCa, namespace });
  const where = `${namespace}/${SecretName.StateCa}`;
  const ca = {
    certificate: text(secret.data, 'tls.crt', where),
    privateKey: text(secret.data, 'tls.key', where),
  };
  const bundle = text(secret.data, 'ca.crt', where);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const caPath = join(dir, 'ca.crt');
  await writeFile(caPath, bundle);
  const issue = async (name: keyof typeof IDENTITIES): Promise<StateClientFiles> => {
    const request: MintRequest = {
      ...IDENTITIES[name],
      notBefore: now,
      notAfter: new Date(now.getTime() + CLIENT_LIFETIME_MS),
    };
    const pair = mintLeaf(request, 'client', ca);
    const files = { ca: caPath, cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
    await writeFile(files.cert, pair.certificate);
    await writeFile(files.key, pair.privateKey, { mode: 0o600 });
    return files;
  };
  return {
    recordsAdmin: await issue('recordsAdmin'),
    verifier: await issue('verifier'),
    serverName: `polychrome-state.${namespace}.svc`,
  };
}

/** The environment that points the CLI at the state plane at `address` as the verifier. */
export function devVerifierEnv(clients: DevStateClients, address: string): Record<string, string> {
  return {
    POLYCHROME_STATE_ADDRESS: address,
    POLYCHROME_STATE_SERVER_NAME: clients.serverName,
    POLYCHROME_STATE_CA: clients.verifier.ca,
    POLYCHROME_STATE_CERT: clients.verifier.cert,
    POLYCHROME_STATE_KEY: clients.verifier.key,
  };
}
