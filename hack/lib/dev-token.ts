import { chmod, writeFile } from 'node:fs/promises';

import type { Role } from '../../common/persona-roles';
import { RecordsClient } from '../../common/records-client';
import { loadStateClientTls } from '../../common/state-channel';
import type { DevStateClients } from './dev-state-client';

/** The identity recorded as minter and role setter of `make dev`'s tokens. */
export const DEV_MINTER = 'dev:make-dev';

/**
 * A bearer session token for the public API on a development stack: the persona of
 * `identity` (created with `roles`, or the existing one given exactly those roles) and a
 * new session, made through the state plane's Records service with `make dev`'s
 * records-admin identity (dev-state-client.ts; the control plane's own certificate has no
 * business outside the control plane). The token is the only copy: write it
 * where its user reads it, never to a log.
 *
 * @param options.ttlMs @default 7 days (the records allow at most 30)
 * @throws StateCallError when the state plane cannot be reached or refuses the call.
 */
export async function mintDevToken(options: {
  readonly clients: DevStateClients;
  /** The state plane, `host:port`. */
  readonly address: string;
  /** `provider:external_id`, e.g. `dev:you`. */
  readonly identity: string;
  readonly roles: readonly Role[];
  readonly ttlMs?: number;
}): Promise<string> {
  const records = new RecordsClient({
    address: options.address,
    serverName: options.clients.serverName,
    tls: await loadStateClientTls(options.clients.recordsAdmin),
    callTimeoutMs: 10_000,
  });
  try {
    let persona = await records.findPersonaByIdentity(options.identity);
    if (persona === undefined) {
      persona = await records.createPersona({
        displayName: options.identity,
        roles: options.roles,
        identities: [options.identity],
      });
    } else if ([...persona.roles].sort().join() !== [...options.roles].sort().join()) {
      persona = await records.setRoles(persona.id, options.roles, {
        expectedVersion: persona.version,
        setBy: DEV_MINTER,
      });
    }
    const ttlMs = options.ttlMs ?? 7 * 24 * 60 * 60 * 1000;
    return (await records.createSession(persona.id, { ttlMs, mintedBy: DEV_MINTER })).token;
  } finally {
    records.close();
  }
}

/** Writes `token` to `path`, readable by its owner only. */
export async function writeDevToken(path: string, token: string): Promise<void> {
  await writeFile(path, `${token}\n`, { mode: 0o600 });
  // `mode` applies only when the file is created: tighten one left by an earlier run.
  await chmod(path, 0o600);
}
