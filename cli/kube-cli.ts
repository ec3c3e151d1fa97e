import { dashboardCommand } from './dashboard';
import { Writable } from 'node:stream';

import { stringify } from 'yaml';

import type { Env } from '../common/config';
import { ApiClient } from './api-client';
import { apiErrorOf, ApiUnreachableError } from './api-errors';
import {
  ExitCode,
  Format,
  formatOptions,
  parse,
  parseFormat,
  reportFailure,
  stringValue,
  UsageError,
  write,
  type CliIo,
} from './cli-support';
import type { CommandDoor } from './command-door';
import { doorCommands } from './conversation-commands';
import { forensicCommand, isForensicCommand } from './conversation-forensics';
import { loadKubeConnection, type KubeConnection } from './kube-connection';
import {
  CONVERSATION_GROUP_VERSION,
  KUBE_DOOR_GROUP_VERSION,
  kubeTransport,
} from './kube-transport';
import { joinUrl } from './transport';

/*
 * `kubectl polychrome`: the conversation commands by Conversation name, through the
 * kubeconfig and the Kubernetes door (docs/kubectl.md). The verbs are the `polychrome`
 * commands (conversation-commands.ts, conversation-forensics.ts) over the kube transport,
 * plus `get` (the Conversation object) and `sessions` (the door's cluster-scoped resource).
 */

export const KUBE_USAGE = `usage: kubectl polychrome <verb> [NAME] [flags]

Conversations by name, in the namespace of -n (else the context's, else "default"):

  get NAME                           the Conversation: phase, conditions, current turn, journal head
  send NAME TEXT... [--key K]        post a message; print the reply, or the approval / question card
  logs NAME -f [--since N | --last-event-id N]
                                     follow the committed events and live text until Ctrl-C
  approve NAME REQUEST-ID [--deny | --cancel] [--comment C]
                                     answer an approval (RBAC: create conversations/approvals;
                                     --cancel: delete)
  answer NAME REQUEST-ID (TEXT... | --cancel [--comment C])
                                     answer the agent's question (create conversations/questions)
  transcript NAME                    the committed turns
  export NAME --actor A [--file F]   the journal export file (stdout unless --file)
  replay NAME --actor A [--public-key KEY]... [--approval-key KEY] [--what-if CHANGE [--live]]
                                     replay the export with no model and no tool
  verify NAME --actor A [--public-key KEY]...
                                     verify the export against the Conversation's checkpoint
                                     and journal keys (--public-key pins others)
  repair NAME --actor A [--dry-run]  excise unreadable journal entries
  resolve NAME TURN --ran [--result FILE] | --did-not-run --actor A
                                     settle a quarantined turn (create conversations/resolve)
  accept-rollback NAME --head N --reason TEXT --actor A
                                     go on from a rolled-back journal, recorded in it
                                     (create conversations/accept-rollback)
  dashboard [--port P] [--no-open]   the read-only forensics UI through a local proxy
                                     on 127.0.0.1 (docs/ui.md); prints the URL

  sessions create --persona P [--ttl 720h]
                                     mint a public-API session token (printed once, to stdout);
                                     it never changes the persona's roles
  sessions revoke ID                 revoke that session
  personas set-roles --persona P --roles R1,R2
                                     set a persona's roles (admin, member, edge; "" for none)

The forensic verbs need --actor kubernetes:<your username> (percent-encoded as
docs/kube-api.md says): on this door you act as your Kubernetes identity.

kube flags: --kubeconfig FILE, --context NAME, -n/--namespace NS
output: -o json|yaml (default text)

exit codes: 0 ok, 1 verification failed or turn quarantined, 2 usage error, 3 could not run
(no kubeconfig, refused, not found: the message says what to set or ask for)
`;

/** The flags every verb takes. */
const kubeOptions = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
} as const;

/** A Conversation name: a DNS subdomain (RFC 1123), as Kubernetes names objects. */
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/u;

function conversationName(value: string | undefined, command: string): string {
  if (value === undefined) throw new UsageError(`${command} needs a Conversation name`);
  if (value.length > 253 || !OBJECT_NAME.test(value)) {
    throw new UsageError(
      `${JSON.stringify(value.slice(0, 80))} is not a Conversation name: lower-case letters, ` +
        'digits, "-" and "." (kubectl get conversations lists them)',
    );
  }
  return value;
}

async function connectionOf(
  values: Record<string, unknown>,
  env: Env | undefined,
): Promise<KubeConnection> {
  const kubeconfig = stringValue(values.kubeconfig);
  const context = stringValue(values.context);
  const namespace = stringValue(values.namespace);
  return loadKubeConnection({
    ...(kubeconfig === undefined ? {} : { kubeconfig }),
    ...(context === undefined ? {} : { context }),
    ...(namespace === undefined ? {} : { namespace }),
    env: env ?? process.env,
  });
}

/** The kube flags a printed follow-up command repeats: the namespace, and what was given. */
function extraFlags(values: Record<string, unknown>, connection: KubeConnection): string[] {
  const given = (flag: string): string[] => {
    const value = stringValue(values[flag]);
    return value === undefined ? [] : [`--${flag}`, value];
  };
  return ['-n', connection.namespace, ...given('context'), ...given('kubeconfig')];
}

/** The Kubernetes door as the commands' door. */
export const kubeDoor: CommandDoor = {
  program: ['kubectl', 'polychrome'],
  options: kubeOptions,
  conversation: conversationName,
  connect: async (values, env) => {
    const connection = await connectionOf(values, env);
    return {
      client: new ApiClient({ transport: kubeTransport(connection) }),
      extraFlags: extraFlags(values, connection),
      statusJournalKeys: async (name, signal) => {
        const object = (await kubeRequest(connection, conversationObjectUrl(connection, name), {
          method: 'GET',
          signal: signal ?? null,
        })) as ConversationObject;
        return (object.status?.journal?.publicKeys ?? []).map((k) => k.publicKey);
      },
    };
  },
  streamVerb: 'logs',
  noun: 'Conversation name',
};

/**
 * kubectl's `-o json|yaml` as the commands' `--format`: `-o yaml` prints what `--format
 * json` prints, one YAML document per JSON line. Everything after `--` is left alone.
 */
export function translateOutput(args: readonly string[]): {
  readonly args: string[];
  readonly yaml: boolean;
} {
  const out: string[] = [];
  let yaml = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--') {
      out.push(...args.slice(i));
      break;
    }
    let value: string | undefined;
    if (arg === '-o' || arg === '--output') {
      value = args[i + 1];
      if (value === undefined) throw new UsageError(`${arg} needs a value: json, yaml or text`);
      i += 1;
    } else if (arg.startsWith('--output=')) {
      value = arg.slice('--output='.length);
    } else if (/^-o[^-]/u.test(arg)) {
      value = arg.slice(2).replace(/^=/u, '');
    }
    if (value === undefined) {
      out.push(arg);
      continue;
    }
    if (value !== 'json' && value !== 'yaml' && value !== 'text') {
      throw new UsageError(`-o must be json, yaml or text, got ${JSON.stringify(value)}`);
    }
    yaml = value === 'yaml';
    out.push('--format', value === 'text' ? 'text' : 'json');
  }
  return { args: out, yaml };
}

/** A stdout that turns each JSON line into a YAML document (`---` between documents). */
export function yamlWriter(out: Writable): Writable {
  let pending = '';
  let documents = 0;
  const convert = (line: string): string => {
    if (line.trim() === '') return '';
    let text: string;
    try {
      text = stringify(JSON.parse(line) as unknown);
    } catch {
      text = `${line}\n`;
    }
    documents += 1;
    return documents === 1 ? text : `---\n${text}`;
  };
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      const text = lines.map(convert).join('');
      if (text === '' || out.write(text)) done();
      else out.once('drain', () => done());
    },
    final(done) {
      const text = convert(pending);
      if (text === '' || out.write(text)) done();
      else out.once('drain', () => done());
    },
  });
}

/** A GET or a write on the cluster, through the connection; an error answer throws. */
async function kubeRequest(
  connection: KubeConnection,
  url: string,
  init: RequestInit,
): Promise<unknown> {
  let response: Response;
  try {
    response = await connection.fetch(url, {
      ...init,
      headers: { accept: 'application/json', 'content-type': 'application/json' },
    });
  } catch (error) {
    throw new ApiUnreachableError(kubeTransport(connection), error);
  }
  if (!response.ok) throw await apiErrorOf(response);
  return await response.json();
}

/** The Conversation object's URL on the CRD API (`polychrome.dev/v1alpha1`). */
function conversationObjectUrl(connection: KubeConnection, name: string): string {
  return joinUrl(`${connection.server}/apis/${CONVERSATION_GROUP_VERSION}`, [
    'namespaces',
    connection.namespace,
    'conversations',
    name,
  ]);
}

interface ConversationObject {
  readonly metadata?: { name?: string; namespace?: string; uid?: string };
  readonly spec?: { owner?: string; visibility?: string };
  readonly status?: {
    phase?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
    currentTurn?: string;
    turns?: { current?: { turnId: string; state: string; requestId?: string } };
    journal?: {
      head?: number;
      lastSignedRoot?: string;
      keyId?: string;
      publicKeys?: { keyId: string; publicKey: string }[];
    };
  };
}

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

async function getConversation(
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

/** `sessions create|revoke`: the door's cluster-scoped `sessions` resource. */
async function sessions(
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

/** `personas set-roles`: the door's cluster-scoped `personaroles` resource. */
async function personas(
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  const [action, ...rest] = args;
  if (action !== 'set-roles') {
    throw new UsageError(`personas takes set-roles, got ${JSON.stringify(action ?? '')}`);
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

/** `logs NAME -f`: the stream command; -f is required, as the stream has no end. */
function logsArgs(args: readonly string[]): string[] {
  const end = args.indexOf('--');
  const flags = end === -1 ? args : args.slice(0, end);
  const follow = flags.filter((a) => a === '-f' || a === '--follow').length;
  if (follow === 0) {
    throw new UsageError(
      'logs follows the stream until Ctrl-C: pass -f (for the committed turns, use transcript)',
    );
  }
  return args.filter((a, i) => (end !== -1 && i >= end) || (a !== '-f' && a !== '--follow'));
}

/** Every verb, for usage and completion. */
export const KUBE_VERBS = [
  'get',
  'send',
  'logs',
  'approve',
  'answer',
  'transcript',
  'export',
  'replay',
  'verify',
  'repair',
  'resolve',
  'accept-rollback',
  'sessions',
  'personas',
  'dashboard',
  'help',
] as const;

async function dispatch(
  verb: string,
  rest: readonly string[],
  env: Env | undefined,
  io: CliIo,
): Promise<ExitCode> {
  switch (verb) {
    case 'help':
    case '--help':
    case '-h':
      await write(io.stdout, KUBE_USAGE);
      return ExitCode.Ok;
    case 'get':
      return getConversation(rest, env, io);
    case 'sessions':
      return sessions(rest, env, io);
    case 'personas':
      return personas(rest, env, io);
    case 'dashboard':
      return dashboardCommand(rest, io, env);
    case 'logs':
      return doorCommands.stream(kubeDoor, logsArgs(rest), env, io);
    case 'send':
    case 'approve':
    case 'answer':
    case 'transcript':
      return doorCommands[verb](kubeDoor, rest, env, io);
    default:
      if (isForensicCommand(verb)) return forensicCommand(kubeDoor, verb, rest, env, io);
      throw new UsageError(`unknown verb ${JSON.stringify(verb)}`);
  }
}

/**
 * Runs one `kubectl polychrome` invocation: never throws, never exits; returns the exit
 * code, having written results to stdout and problems to stderr.
 */
export async function runKubectlPolychrome(
  argv: readonly string[],
  io: CliIo,
  env?: Env,
): Promise<ExitCode> {
  let yamlOut: Writable | undefined;
  try {
    const [verb, ...rest] = argv;
    if (verb === undefined) throw new UsageError('no verb given');
    const translated = translateOutput(rest);
    yamlOut = translated.yaml ? yamlWriter(io.stdout) : undefined;
    const out = yamlOut === undefined ? io : { ...io, stdout: yamlOut };
    return await dispatch(verb, translated.args, env, out);
  } catch (error) {
    return reportFailure(error, io, { program: 'kubectl polychrome', usage: KUBE_USAGE });
  } finally {
    if (yamlOut !== undefined) {
      const done = new Promise<void>((resolve) => yamlOut?.once('finish', () => resolve()));
      yamlOut.end();
      await done;
    }
  }
}
