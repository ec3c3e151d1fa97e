import type { Env } from '../common/config';
import {
  paymentPolicySchema,
  paymentPolicySetSchema,
  type PaymentPolicy,
  type PaymentPolicySet,
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
import { listConversationPayments } from './payments-list';
import { parsePublicKey, parsePublicKeyFlags, publicKeyOption } from './public-key-flags';
import { ConversationOperation } from './transport';

/*
 * `payments link NAME --wallet W --limits FILE --reason TEXT`, `payments unlink NAME
 * --reason TEXT` and `payments policy NAME` (docs/kubectl.md): an admin links a wallet to a
 * conversation with its spend limits, unlinks it, or reads the policy in force, acting as
 * one of their own identities; each change is recorded in the journal (docs/payments.md,
 * "Linking a wallet"). The limits file is sent as it is read: the control plane checks it.
 */

const ACTIONS = ['link', 'unlink', 'policy'] as const;

/** The `payments` command over `door`. */
export async function paymentsCommand(
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, {
    ...door.options,
    ...formatOptions,
    ...publicKeyOption,
    actor: { type: 'string' },
    wallet: { type: 'string' },
    limits: { type: 'string' },
    reason: { type: 'string' },
    'approval-key': { type: 'string' },
  });
  const format = parseFormat(values);
  const [action, id, ...extra] = positionals;
  if (!(ACTIONS as readonly (string | undefined)[]).includes(action)) {
    if (action === undefined || id !== undefined) {
      throw new UsageError(
        `payments takes a ${door.noun} (its payments), or link, unlink or policy then the ${door.noun}; got ${JSON.stringify(positionals.join(' '))}`,
      );
    }
    return listCommand(door, action, values, env, io);
  }
  if (values['approval-key'] !== undefined || values['public-key'] !== undefined) {
    throw new UsageError(
      `payments ${String(action)} takes no --public-key or --approval-key: only payments NAME reads the journal`,
    );
  }
  const conversation = door.conversation(id, `payments ${String(action)}`);
  noExtra(extra, `payments ${String(action)}`, `one ${door.noun}`);
  const body = action === 'policy' ? undefined : await changeOf(action === 'link', values);
  const actorGiven = values.actor === undefined ? undefined : parseActorFlag(values.actor);
  const connection = await door.connect(values, env);
  const actor = await actorOrSelf(actorGiven, connection, io.signal);
  const target = { conversation, operation: ConversationOperation.PaymentPolicy };
  const answer = await readOrSetPolicy(
    connection.client,
    target,
    { actor, change: body },
    {
      read: { schema: paymentPolicySchema, what: 'PaymentPolicy' },
      set: { schema: paymentPolicySetSchema, what: 'PaymentPolicySet' },
    },
    io.signal,
  );
  await write(
    io.stdout,
    format === Format.Json ? `${JSON.stringify(answer.raw)}\n` : formatPolicy(answer.value),
  );
  return ExitCode.Ok;
}

/** `payments NAME`: the conversation's payments, audited (payments-list.ts). */
async function listCommand(
  door: CommandDoor,
  id: string,
  values: Record<string, unknown>,
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const conversationId = door.conversation(id, 'payments');
  if (values.wallet !== undefined || values.limits !== undefined || values.reason !== undefined) {
    throw new UsageError(
      'payments NAME lists payments: it takes no --wallet, --limits or --reason',
    );
  }
  // Read before anything is fetched, so a bad key is a usage error (exit 2).
  const publicKeys = parsePublicKeyFlags(values);
  const approvalText = stringValue(values['approval-key']);
  const approvalKey =
    approvalText === undefined ? undefined : parsePublicKey(approvalText, '--approval-key');
  const given = values.actor === undefined ? undefined : parseActorFlag(values.actor);
  const connection = await door.connect(values, env);
  const { client, statusJournalKeys } = connection;
  const actor = await actorOrSelf(given, connection, io.signal);
  const request = {
    conversationId,
    actor,
    format: parseFormat(values),
    ...(io.signal === undefined ? {} : { signal: io.signal }),
  };
  return listConversationPayments(client, request, io, {
    publicKeys,
    ...(statusJournalKeys === undefined ? {} : { statusJournalKeys }),
    ...(approvalKey === undefined ? {} : { approvalKey }),
  });
}

/** The body of a link (wallet, limits from the file, reason) or an unlink. @throws UsageError */
async function changeOf(
  link: boolean,
  values: Record<string, unknown>,
): Promise<{ wallet: string; limits?: unknown; reason: string }> {
  const verb = link ? 'payments link' : 'payments unlink';
  const reason = stringValue(values.reason);
  if (reason === undefined || reason.trim() === '') {
    throw new UsageError(`${verb} needs --reason TEXT: why (it is recorded in the journal)`);
  }
  if (!link) {
    if (values.wallet !== undefined || values.limits !== undefined) {
      throw new UsageError('payments unlink takes no --wallet or --limits: it links no wallet');
    }
    return { wallet: '', reason };
  }
  const wallet = stringValue(values.wallet);
  const file = stringValue(values.limits);
  if (wallet === undefined || wallet === '' || file === undefined) {
    throw new UsageError(
      'payments link needs --wallet W (a wallet name of the control plane) and --limits FILE (the spend limits, JSON)',
    );
  }
  return { wallet, limits: await limitsFrom(file), reason };
}

/** The policy in a few lines: the wallet, who set it when and where, and the limits. */
export function formatPolicy(policy: PaymentPolicy | PaymentPolicySet): string {
  const lines =
    policy.wallet === ''
      ? [`conversation ${policy.conversationId}: no wallet linked; payments are off`]
      : [`conversation ${policy.conversationId}: wallet ${policy.wallet}`];
  if (policy.position !== undefined) {
    const when =
      policy.setAtMs === undefined ? '' : ` at ${new Date(policy.setAtMs).toISOString()}`;
    lines.push(`  set by ${policy.setBy ?? '?'}${when} (position ${String(policy.position)})`);
  }
  if (policy.limits !== undefined) lines.push(`  limits ${JSON.stringify(policy.limits)}`);
  if ('message' in policy && typeof policy.message === 'string') lines.push(`  ${policy.message}`);
  return `${lines.join('\n')}\n`;
}
