/**
 * What `make dev` waits for (hack/dev.ts): a Conversation Ready with a running harness, and
 * Agents and ModelConfigs Ready.
 */
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { pollUntil } from './processes';

const group = 'polychrome.dev';
const version = 'v1alpha1';

function get(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? Reflect.get(value, key) : undefined;
}

/** The `Ready` condition of an object, if it has one. */
function readyCondition(obj: unknown): unknown {
  const conditions = get(get(obj, 'status'), 'conditions');
  return Array.isArray(conditions)
    ? conditions.find((c: unknown) => get(c, 'type') === 'Ready')
    : undefined;
}

/** A Conversation's uid and its harness's endpoint. */
export interface ReadyConversation {
  readonly uid: string;
  readonly endpoint: string;
}

/**
 * Waits until Conversation `name` is Ready (the phase, or the condition: a turn paused on an
 * approval is ready too) and its sandbox has an endpoint.
 */
export async function waitConversationReady(
  kc: KubeConfig,
  namespace: string,
  name: string,
): Promise<ReadyConversation> {
  const objects = kc.makeApiClient(CustomObjectsApi);
  return pollUntil(
    `Conversation ${name} to be Ready with a running harness`,
    async () => {
      const obj: unknown = await objects.getNamespacedCustomObject({
        group,
        version,
        plural: 'conversations',
        namespace,
        name,
      });
      const status = get(obj, 'status');
      const endpoint = get(get(status, 'sandbox'), 'endpoint');
      const uid = get(get(obj, 'metadata'), 'uid');
      const isReady =
        get(status, 'phase') === 'Ready' || get(readyCondition(obj), 'status') === 'True';
      return isReady && typeof endpoint === 'string' && typeof uid === 'string'
        ? { uid, endpoint }
        : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 500 },
  );
}

/**
 * Waits until every named object of `plural` is Ready for its current spec (its status's
 * `observedGeneration` is the object's generation).
 *
 * @throws Error on the timeout, quoting each one's Ready message (what to fix).
 */
export async function waitReady(
  kc: KubeConfig,
  namespace: string,
  plural: 'agents' | 'modelconfigs',
  names: readonly string[],
  timeoutMs = 60_000,
): Promise<void> {
  const objects = kc.makeApiClient(CustomObjectsApi);
  const messages = new Map<string, string>();
  try {
    await pollUntil(
      `the ${plural} ${names.join(', ')} to be Ready`,
      async () => {
        for (const name of names) {
          const obj: unknown = await objects.getNamespacedCustomObject({
            group,
            version,
            plural,
            namespace,
            name,
          });
          const condition = readyCondition(obj);
          const current =
            get(get(obj, 'status'), 'observedGeneration') ===
            get(get(obj, 'metadata'), 'generation');
          if (current && get(condition, 'status') === 'True') messages.delete(name);
          else {
            const message = get(condition, 'message');
            messages.set(name, typeof message === 'string' ? message : 'no Ready condition yet');
          }
        }
        return messages.size === 0 ? true : undefined;
      },
      { timeoutMs, intervalMs: 500 },
    );
  } catch (err: unknown) {
    const why = [...messages].map(([name, message]) => `${name}: ${message}`).join('; ');
    throw new Error(`dev: not Ready: ${why}`, { cause: err });
  }
}
