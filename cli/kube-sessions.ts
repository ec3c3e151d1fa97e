import type { Env } from '../common/config';
import {
  ExitCode,
  Format,
  formatOptions,
  parse,
  parseFormat,
  stringValue,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import { connectionOf, kubeOptions, kubeRequest } from './kube-door';
import { KUBE_DOOR_GROUP_VERSION } from './kube-transport';
import { joinUrl } from './transport';

/*
 * `kubectl polychrome sessions create|revoke`: public-API session tokens, minted and revoked
 * through the door's cluster-scoped `sessions` resource (docs/kubectl.md).
 */

/** `sessions create|revoke`: the door's cluster-scoped `sessions` resource. */
export async function sessions(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const [action, ...rest] = args;
  const { values, positionals } = parse(rest, {
    ...kubeOptions,
    ...formatOptions,
    ...(action === 'create'
      ? {
          persona: { type: 'string' },
          role: { type: 'string' },
          roles: { type: 'string' },
          ttl: { type: 'string' },
        }
      : {}),
  });
  const format = parseFormat(values);
  const base = `/apis/${KUBE_DOOR_GROUP_VERSION}`;
  if (action === 'create') {
    if (positionals.length > 0)
      throw new UsageError(`sessions create takes no argument, got ${positionals.join(' ')}`);
    const persona = stringValue(values.persona);
    if (persona === undefined) {
      throw new UsageError('sessions create needs --persona P (an identity, provider:external_id)');
    }
    if (stringValue(values.role) !== undefined || stringValue(values.roles) !== undefined) {
      throw new UsageError(
        "sessions create does not set roles (minting never changes a persona's roles); set them " +
          `first with: kubectl polychrome personas set-roles --persona ${persona} --roles R1,R2`,
      );
    }
    const ttl = stringValue(values.ttl);
    const body = { persona, ...(ttl === undefined ? {} : { ttl }) };
    const connection = await connectionOf(values, env);
    const session = (await kubeRequest(connection, `${connection.server}${base}/sessions`, {
      method: 'POST',
      body: JSON.stringify(body),
      signal: io.signal ?? null,
    })) as { token?: string; metadata?: { name?: string }; expiresAt?: string };
    if (format === Format.Json) {
      await write(io.stdout, `${JSON.stringify(session)}\n`);
    } else {
      // The token alone on stdout (TOKEN=$(kubectl polychrome sessions create ...)); it is
      // shown this once. What is not secret goes to stderr.
      await write(io.stdout, `${session.token ?? ''}\n`);
      await write(
        io.stderr,
        `session ${session.metadata?.name ?? '?'} for ${persona}, expires ${session.expiresAt ?? '?'}; ` +
          `revoke it with: kubectl polychrome sessions revoke ${session.metadata?.name ?? 'ID'}\n`,
      );
    }
    return ExitCode.Ok;
  }
  if (action === 'revoke') {
    const [id, ...extra] = positionals;
    if (id === undefined || extra.length > 0) {
      throw new UsageError(
        'sessions revoke takes one session id (the metadata.name create printed)',
      );
    }
    const connection = await connectionOf(values, env);
    const answer = await kubeRequest(
      connection,
      joinUrl(`${connection.server}${base}/sessions`, [id]),
      {
        method: 'DELETE',
        signal: io.signal ?? null,
      },
    );
    await write(
      io.stdout,
      format === Format.Json ? `${JSON.stringify(answer)}\n` : `session ${id} revoked\n`,
    );
    return ExitCode.Ok;
  }
  throw new UsageError(`sessions takes create or revoke, got ${JSON.stringify(action ?? '')}`);
}
