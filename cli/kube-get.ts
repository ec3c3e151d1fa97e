import type { Env } from '../common/config';
import {
  ExitCode,
  Format,
  formatOptions,
  parse,
  parseFormat,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import {
  connectionOf,
  conversationName,
  conversationObjectUrl,
  kubeOptions,
  kubeRequest,
  type ConversationObject,
} from './kube-door';

/* `kubectl polychrome get NAME`: the Conversation object from the CRD API, not the door. */

/** `get NAME`: the Conversation object from the CRD API, summarized. */
function conversationSummary(object: ConversationObject): string {
  const status = object.status ?? {};
  const current = status.turns?.current;
  const journal = status.journal;
  const lines = [
    `Name:          ${object.metadata?.name ?? ''}`,
    `Namespace:     ${object.metadata?.namespace ?? ''}`,
    `UID:           ${object.metadata?.uid ?? ''}`,
    `Owner:         ${object.spec?.owner ?? ''}`,
    `Phase:         ${status.phase ?? '(none yet)'}`,
    `Current turn:  ${
      current === undefined
        ? (status.currentTurn ?? 'none')
        : `${current.turnId} (${current.state}${current.requestId === undefined ? '' : `, request ${current.requestId}`})`
    }`,
    `Journal head:  ${
      journal?.head === undefined
        ? '(not reported yet)'
        : `${String(journal.head)}${journal.lastSignedRoot === undefined ? '' : ` (root ${journal.lastSignedRoot}${journal.keyId === undefined ? '' : `, key ${journal.keyId}`})`}`
    }`,
    'Conditions:',
    ...(status.conditions ?? []).map(
      (c) =>
        `  ${c.type}=${c.status}${c.reason === undefined ? '' : ` ${c.reason}`}${c.message === undefined || c.message === '' ? '' : `: ${c.message}`}`,
    ),
  ];
  if ((status.conditions ?? []).length === 0) lines.push('  (none)');
  return `${lines.join('\n')}\n`;
}

export async function getConversation(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const { values, positionals } = parse(args, { ...kubeOptions, ...formatOptions });
  const format = parseFormat(values);
  const [id, ...extra] = positionals;
  const name = conversationName(id, 'get');
  if (extra.length > 0)
    throw new UsageError(`get takes one Conversation name, got extra ${extra.join(' ')}`);
  const connection = await connectionOf(values, env);
  const url = conversationObjectUrl(connection, name);
  const object = await kubeRequest(connection, url, { method: 'GET', signal: io.signal ?? null });
  await write(
    io.stdout,
    format === Format.Json
      ? `${JSON.stringify(object)}\n`
      : conversationSummary(object as ConversationObject),
  );
  return ExitCode.Ok;
}
