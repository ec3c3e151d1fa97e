/**
 * The conversation limit in the real control-plane process: POLYCHROME_LIMIT_CONVERSATIONS
 * read by its config, the count taken from its own informer cache (main.ts), on the real
 * kube-apiserver of the shared local cluster.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { apiCall } from './support/public-api';
import { kubeConfig } from './support/kube';
import { startTurnStack, type TurnStack } from './support/turn-stack';

/** `spec.owner` of every Conversation in `namespace`, as kube-apiserver lists them. */
async function ownersIn(namespace: string): Promise<string[]> {
  const api = (await kubeConfig()).makeApiClient(CustomObjectsApi);
  const list: unknown = await api.listNamespacedCustomObject({
    group: 'polychrome.dev',
    version: 'v1alpha1',
    namespace,
    plural: 'conversations',
  });
  const items: unknown =
    typeof list === 'object' && list !== null ? Reflect.get(list, 'items') : [];
  return (Array.isArray(items) ? items : [])
    .map((item: unknown) => {
      const spec: unknown =
        typeof item === 'object' && item !== null ? Reflect.get(item, 'spec') : undefined;
      return String(typeof spec === 'object' && spec !== null ? Reflect.get(spec, 'owner') : '');
    })
    .sort();
}

describe('the conversation limit of a real control plane', () => {
  let stack: TurnStack;
  let ann: string;
  let bob: string;

  beforeAll(async () => {
    stack = await startTurnStack({
      namespacePrefix: 'limits-cp',
      controlPlaneEnv: { POLYCHROME_LIMIT_CONVERSATIONS: '2' },
    });
    ann = await stack.mintToken('test:ann');
    bob = await stack.mintToken('test:bob');
  }, 180_000);

  afterAll(async () => {
    await stack?.stop();
  });

  it('counts what ann owns in its informer cache, kubectl-made ones too: the third is refused 429 and not created; bob still creates', async () => {
    await stack.withDiagnostics(async () => {
      // One ann owns, made with kubectl: the informer cache counts it as the API's own.
      await stack.createConversation('ann-by-kubectl', { owner: 'test:ann' });
      const first = await apiCall(stack.apiUrl, 'POST', '/v1/conversations', {
        token: ann,
        body: {},
      });
      expect(first.status).toBe(201);
      const refused = await apiCall(stack.apiUrl, 'POST', '/v1/conversations', {
        token: ann,
        body: {},
      });
      expect(refused.status).toBe(429);
      expect(refused.body.error).toMatchObject({
        code: 'resource_exhausted',
        details: {
          limit: 'conversations',
          current: 2,
          max: 2,
          setting: 'POLYCHROME_LIMIT_CONVERSATIONS',
          retryAfterSeconds: 60,
        },
      });
      // Nothing was created for the refused request.
      expect(await ownersIn(stack.namespace)).toEqual(['test:ann', 'test:ann']);
      const other = await apiCall(stack.apiUrl, 'POST', '/v1/conversations', {
        token: bob,
        body: {},
      });
      expect(other.status).toBe(201);
    });
  });
});
