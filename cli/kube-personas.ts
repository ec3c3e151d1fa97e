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
import { connectionOf, kubeDoor, kubeOptions, kubeRequest } from './kube-door';
import { KUBE_DOOR_GROUP_VERSION } from './kube-transport';

/*
 * `kubectl polychrome personas set-roles`: a persona's roles, set through the door's
 * cluster-scoped `personaroles` resource (docs/kube-api.md, "Persona roles"); and
 * `personas payment-policy ...`, the command `polychrome personas payment-policy` runs
 * (persona-policy-command.ts), over the door's `personapaymentpolicies`.
 */

/** `personas set-roles` and `personas payment-policy`: the door's persona resources. */
export async function personas(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const [action, ...rest] = args;
  if (action === 'payment-policy') {
    const { personaPolicyCommand } = await import('./persona-policy-command.ts');
    return personaPolicyCommand(kubeDoor, rest, env, io);
  }
  if (action !== 'set-roles') {
    throw new UsageError(
      `personas takes set-roles or payment-policy, got ${JSON.stringify(action ?? '')}`,
    );
  }
  const { values, positionals } = parse(rest, {
    ...kubeOptions,
    ...formatOptions,
    persona: { type: 'string' },
    roles: { type: 'string' },
  });
  const format = parseFormat(values);
  const persona = stringValue(values.persona);
  const roles = stringValue(values.roles);
  if (positionals.length > 0 || persona === undefined || roles === undefined) {
    throw new UsageError(
      'personas set-roles needs --persona P (an identity) and --roles R1,R2 (admin, member, edge; "" for none)',
    );
  }
  const body = { persona, roles: roles.split(',').filter((r) => r !== '') };
  const connection = await connectionOf(values, env);
  const answer = (await kubeRequest(
    connection,
    `${connection.server}/apis/${KUBE_DOOR_GROUP_VERSION}/personaroles`,
    { method: 'POST', body: JSON.stringify(body), signal: io.signal ?? null },
  )) as { persona?: { id?: string; roles?: string[] } };
  await write(
    io.stdout,
    format === Format.Json
      ? `${JSON.stringify(answer)}\n`
      : `persona ${answer.persona?.id ?? '?'} (${persona}) has roles: ${(answer.persona?.roles ?? []).join(', ') || 'none'}\n`,
  );
  return ExitCode.Ok;
}
