import type { Env } from '../common/config';
import {
  personaPaymentPolicySchema,
  personaPaymentPolicySetSchema,
  type PersonaPaymentPolicy,
  type PersonaPaymentPolicySet,
} from './api-answers';
import {
  ExitCode,
  Format,
  formatOptions,
  noExtra,
  parse,
  parseFormat,
  stringValue,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import type { CommandDoor } from './command-door';
import { actorOrSelf, parseActorFlag, readOrSetPolicy } from './forensic-request';
import { limitsFrom } from './limits-file';
import { PersonaOperation } from './transport';

/*
 * `personas payment-policy set|clear|get PERSONA` (docs/payments.md, "A persona's wallet
 * and limits"): an admin gives a persona spend limits, and a wallet that pays its turns
 * where a conversation links none, clears them, or reads them with every change, acting as
 * one of their own identities, never on their own persona. One command on both doors: the
 * public API by persona id with a session token (`polychrome personas ...`), and the
 * Kubernetes door's `personapaymentpolicies` (`kubectl polychrome personas ...`). The
 * control plane decides who may and checks the limits; this only reads the flags.
 */

const ACTIONS = ['set', 'clear', 'get'] as const;
type Action = (typeof ACTIONS)[number];

/** What a set or a clear sends besides the actor: the public API's body. */
interface PolicyChange {
  readonly wallet: string;
  readonly limits?: unknown;
  readonly reason: string;
}

/** `personas payment-policy ...` over `door`: the words after `payment-policy`. */
export async function personaPolicyCommand(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...door.options,
    ...formatOptions,
    actor: { type: 'string' },
    wallet: { type: 'string' },
    limits: { type: 'string' },
    reason: { type: 'string' },
  });
  const format = parseFormat(values);
  const [action, persona, ...extra] = positionals;
  if (!isAction(action)) {
    throw new UsageError(
      `personas payment-policy takes set, clear or get, then the persona id; got ${JSON.stringify(positionals.join(' '))}`,
    );
  }
  const command = `personas payment-policy ${action}`;
  const personaId = personaIdOf(persona, command);
  noExtra(extra, command, 'one persona id');
  const change = await changeOf(action, values);
  const given = values.actor === undefined ? undefined : parseActorFlag(values.actor);
  const connection = await door.connect(values, env);
  const actor = await actorOrSelf(given, connection, io.signal);
  const target = { persona: personaId, operation: PersonaOperation.PaymentPolicy };
  const answer = await readOrSetPolicy(
    connection.client,
    target,
    { actor, change },
    {
      read: { schema: personaPaymentPolicySchema, what: 'PersonaPaymentPolicy' },
      set: { schema: personaPaymentPolicySetSchema, what: 'PersonaPaymentPolicySet' },
    },
    io.signal,
  );
  await write(
    io.stdout,
    format === Format.Json ? `${JSON.stringify(answer.raw)}\n` : formatPersonaPolicy(answer.value),
  );
  return ExitCode.Ok;
}

function isAction(value: string | undefined): value is Action {
  return (ACTIONS as readonly (string | undefined)[]).includes(value);
}

/**
 * The persona positional: the persona's id in the records (what `personas set-roles`
 * prints), not one of its identities. The records check its form.
 * @throws UsageError
 */
export function personaIdOf(value: string | undefined, command: string): string {
  if (value === undefined || value === '') {
    throw new UsageError(
      `${command} needs a persona id (the id kubectl polychrome personas set-roles prints)`,
    );
  }
  if (value.includes(':')) {
    throw new UsageError(
      `${JSON.stringify(value.slice(0, 80))} is an identity, not a persona id: ${command} takes ` +
        "the persona's id in the records (the id kubectl polychrome personas set-roles prints)",
    );
  }
  return value;
}

/**
 * The body of a set (the limits from the file, an optional wallet, the reason) or a clear
 * (the reason); none for a get, which takes none of those flags.
 * @throws UsageError naming the flag at fault.
 */
export async function changeOf(
  action: Action,
  values: Record<string, unknown>,
): Promise<PolicyChange | undefined> {
  const command = `personas payment-policy ${action}`;
  const reason = stringValue(values.reason);
  const wallet = stringValue(values.wallet);
  const file = stringValue(values.limits);
  if (action === 'get') {
    if (reason !== undefined || wallet !== undefined || file !== undefined) {
      throw new UsageError(
        `${command} reads the policy: it takes no --wallet, --limits or --reason`,
      );
    }
    return undefined;
  }
  if (reason === undefined || reason.trim() === '') {
    throw new UsageError(
      `${command} needs --reason TEXT: why (it is recorded with the change in the state plane's records)`,
    );
  }
  if (action === 'clear') {
    if (wallet !== undefined || file !== undefined) {
      throw new UsageError(`${command} takes no --wallet or --limits: it removes both`);
    }
    return { wallet: '', reason };
  }
  if (file === undefined) {
    throw new UsageError(
      `${command} needs --limits FILE (the spend limits, JSON; docs/payments.md, "Spend limits"), and --wallet W for a wallet that pays its turns`,
    );
  }
  return { wallet: wallet ?? '', limits: await limitsFrom(file), reason };
}

/** The policy in a few lines: the wallet, the limits, who set it, and every change. */
export function formatPersonaPolicy(
  policy: PersonaPaymentPolicy | PersonaPaymentPolicySet,
): string {
  const id = policy.personaId;
  const lines = [
    policy.wallet !== ''
      ? `persona ${id}: wallet ${policy.wallet}, for its turns in conversations that link none`
      : policy.limits !== undefined
        ? `persona ${id}: no wallet; its limits hold every payment of its turns`
        : `persona ${id}: no payment policy`,
  ];
  if (policy.limits !== undefined) lines.push(`  limits ${JSON.stringify(policy.limits)}`);
  if (policy.setBy !== undefined) {
    const when = policy.setAtMs === undefined ? '' : ` at ${isoOf(policy.setAtMs)}`;
    const why = policy.reason === undefined ? '' : `: ${policy.reason}`;
    lines.push(`  set by ${policy.setBy}${when} (change ${String(policy.sequence)})${why}`);
  }
  if (policy.history.length > 0) lines.push('  changes, oldest first:');
  for (const change of policy.history) {
    const terms = `${change.wallet === '' ? 'no wallet' : `wallet ${change.wallet}`}, ${change.limits === undefined ? 'no limits' : 'limits'}`;
    lines.push(
      `    ${String(change.sequence)}. ${isoOf(change.setAtMs)} by ${change.setBy}: ${terms}; ${change.reason}`,
    );
  }
  if ('message' in policy && typeof policy.message === 'string') lines.push(`  ${policy.message}`);
  return `${lines.join('\n')}\n`;
}

function isoOf(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * `personas ...` of `polychrome`: only `payment-policy` goes through the public API
 * (roles are set through the Kubernetes door or the records).
 */
export async function personasGroup(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const [sub, ...rest] = args;
  if (sub !== 'payment-policy') {
    throw new UsageError(
      `personas takes payment-policy, got ${JSON.stringify(sub ?? '')} ` +
        '(roles are set with kubectl polychrome personas set-roles, docs/kube-api.md "Persona roles")',
    );
  }
  return personaPolicyCommand(door, rest, env, io);
}
