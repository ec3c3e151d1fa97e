import type { Env } from '../common/config';
import { kubernetesIdentityOf } from '../common/identity';
import { ApiClient } from './api-client';
import { apiErrorOf, ApiUnreachableError } from './api-errors';
import { stringValue, UsageError } from './cli-support';
import type { CommandDoor } from './command-door';
import { loadKubeConnection, type KubeConnection } from './kube-connection';
import { CONVERSATION_GROUP_VERSION, kubeTransport } from './kube-transport';
import { joinUrl } from './transport';

/*
 * The Kubernetes door as the commands' door (`kubectl polychrome VERB NAME`): a conversation
 * by its Conversation name in the namespace, through the kubeconfig (kube-connection.ts,
 * docs/kubectl.md), and the plain requests on the cluster the plugin makes besides.
 */

/** The flags every verb takes. */
export const kubeOptions = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
} as const;

/** A Conversation name: a DNS subdomain (RFC 1123), as Kubernetes names objects. */
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/u;

/** The Conversation name positional. @throws UsageError */
export function conversationName(value: string | undefined, command: string): string {
  if (value === undefined) throw new UsageError(`${command} needs a Conversation name`);
  if (value.length > 253 || !OBJECT_NAME.test(value)) {
    throw new UsageError(
      `${JSON.stringify(value.slice(0, 80))} is not a Conversation name: lower-case letters, ` +
        'digits, "-" and "." (kubectl get conversations lists them)',
    );
  }
  return value;
}

/** The kubeconfig's connection, from the kube flags and the environment. */
export async function connectionOf(
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
      selfIdentity: (signal) => selfIdentity(connection, signal),
    };
  },
  streamVerb: 'logs',
  noun: 'Conversation name',
};

/**
 * The caller's own identity on this door, `kubernetes:<username>` (common/identity.ts), from
 * the username kube-apiserver reports for the kubeconfig's credentials: a SelfSubjectReview,
 * what `kubectl auth whoami` asks. kube-apiserver answers it for any authenticated user.
 * @throws ApiCallError, ApiUnreachableError, UsageError (no username in the answer)
 */
export async function selfIdentity(
  connection: KubeConnection,
  signal?: AbortSignal,
): Promise<string> {
  const review = (await kubeRequest(
    connection,
    `${connection.server}/apis/authentication.k8s.io/v1/selfsubjectreviews`,
    {
      method: 'POST',
      body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
      signal: signal ?? null,
    },
  )) as { status?: { userInfo?: { username?: unknown } } } | null;
  const username = review?.status?.userInfo?.username;
  if (typeof username !== 'string' || username === '') {
    throw new UsageError(
      'kube-apiserver did not say who you are (its SelfSubjectReview has no username): ' +
        'pass --actor kubernetes:<your username>',
    );
  }
  return kubernetesIdentityOf(username);
}

/** A GET or a write on the cluster, through the connection; an error answer throws. */
export async function kubeRequest(
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
export function conversationObjectUrl(connection: KubeConnection, name: string): string {
  return joinUrl(`${connection.server}/apis/${CONVERSATION_GROUP_VERSION}`, [
    'namespaces',
    connection.namespace,
    'conversations',
    name,
  ]);
}

/** The fields of a Conversation object the plugin reads. */
export interface ConversationObject {
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
