import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { isAppError } from '../../common/errors';
import { ModelApi, type ModelRequest } from '../../common/model/model-port';
import { secretGrantCommands } from '../../operator/controller/model-config-ready';
import { ProviderModelRelay } from '../../operator/models/provider-model-relay';
import { KubeSecretKeyReader } from '../../operator/models/secret-key-reader';
import type { ModelRoute } from '../../operator/turns/model-relay-port';
import { readyStatus } from '../support/in-memory-conversations';
import { MessagesApiServer } from '../support/messages-api-server';
import { startRealTurns, TEST_OWNER } from '../support/real-turns';
import { CONTROL_PLANE_ACCOUNT, controlPlaneIdentity } from './support/control-plane-identity';
import { freshNamespace, kubeConfig } from './support/kube';

// The model relay reads each route's key as the control plane's own ServiceAccount (the
// identity config/cluster grants, as in agent-resources.test.ts), against the real API
// server with RBAC on: it may read a Secret only once the namespace grants that one, and
// the key reaches the provider and nothing else (docs/turns.md, "Who calls the model").
const account = CONTROL_PLANE_ACCOUNT;
const KEY = 'sk-ant-relay-0123456789-only-in-the-secret';
const ROTATED = 'sk-ant-relay-rotated-9876543210-only-in-the-secret';

const request: ModelRequest = {
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }],
  tools: [],
  toolChoice: 'auto',
};

/** The rejection of `promise`, which must reject. */
async function failureOf(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    if (isAppError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a rejection');
}

describe('the model relay, reading keys as the control plane', () => {
  let admin: KubeConfig;
  let kubectl: (args: readonly string[]) => string;
  let ns: { name: string; dispose: () => Promise<void> };
  let relay: ProviderModelRelay;
  let reader: KubeSecretKeyReader;
  let api: MessagesApiServer;
  const route = (secret: string, key = 'api-key'): ModelRoute => ({
    provider: ModelApi.Anthropic,
    model: 'claude-relayed',
    baseUrl: api.url,
    secretKeyRef: { name: secret, key },
    namespace: ns.name,
  });
  const call = (r: ModelRoute) =>
    relay.complete(r, request, { signal: AbortSignal.timeout(10_000) });
  const putSecret = async (name: string, data: Record<string, string>): Promise<void> => {
    const core = admin.makeApiClient(CoreV1Api);
    const body = { metadata: { name }, stringData: data };
    try {
      await core.replaceNamespacedSecret({ namespace: ns.name, name, body });
    } catch {
      await core.createNamespacedSecret({ namespace: ns.name, body });
    }
  };

  beforeAll(async () => {
    admin = await kubeConfig();
    const identity = await controlPlaneIdentity();
    kubectl = identity.kubectl;
    ns = await freshNamespace(admin, 'relay');
    await putSecret('model-key', { 'api-key': KEY });
    reader = new KubeSecretKeyReader(identity.asControlPlane);
    relay = new ProviderModelRelay({
      secrets: reader,
      account,
      adapter: { maxAttempts: 1 },
    });
    api = await MessagesApiServer.start({ apiKey: KEY });
    api.setResponder(() => ({ kind: 'message', content: [{ type: 'text', text: 'hi there' }] }));
  });

  afterAll(async () => {
    await api.close();
    await ns.dispose();
  });

  it('is refused a Secret it was not granted, with the two commands that grant it; runs them and calls with the key', async () => {
    const refused = await failureOf(call(route('model-key')));
    expect(refused.code).toBe('permission_denied');
    expect(refused.message).toContain(
      `the control plane (ServiceAccount ${account.namespace}/${account.name}) may not get Secret ${ns.name}/model-key, which holds the API key (key api-key) of model claude-relayed`,
    );
    const commands = refused.message.slice(refused.message.indexOf('kubectl ')).split(' && ');
    expect(commands).toHaveLength(2);
    expect(api.requests).toEqual([]);
    for (const command of commands) kubectl(command.split(' ').slice(1));
    const response = await call(route('model-key'));
    expect(response.content).toEqual([{ type: 'text', text: 'hi there' }]);
    expect(api.requests.at(-1)?.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it('a rotated key takes effect on the next call', async () => {
    await api.close();
    api = await MessagesApiServer.start({ apiKey: ROTATED });
    api.setResponder(() => ({ kind: 'message', content: [{ type: 'text', text: 'rotated' }] }));
    // The old key, read again on this call, is refused by the provider; the error holds no key.
    const stale = await failureOf(call(route('model-key')));
    expect(stale.code).toBe('unauthenticated');
    expect(stale.message).not.toContain(KEY);
    await putSecret('model-key', { 'api-key': ROTATED });
    expect((await call(route('model-key'))).content).toEqual([{ type: 'text', text: 'rotated' }]);
    expect(api.requests.at(-1)?.headers.authorization).toBe(`Bearer ${ROTATED}`);
  });

  it('names the Secret and key when the key is missing or the Secret is gone', async () => {
    const missing = await failureOf(call(route('model-key', 'other')));
    expect(missing).toEqual({
      code: 'failed_precondition',
      message: `Secret ${ns.name}/model-key has no key other, or it is empty: put the API key of model claude-relayed there, or fix the ModelConfig's spec.secretKeyRef.key`,
    });
    // The grant of a Secret that does not exist: the read then finds it missing.
    for (const command of secretGrantCommands(ns.name, 'gone', account).split(' && ')) {
      kubectl(command.split(' ').slice(1));
    }
    const gone = await failureOf(call(route('gone')));
    expect(gone.code).toBe('failed_precondition');
    expect(gone.message).toContain(`Secret ${ns.name}/gone does not exist`);
  });

  it('runs a relayed turn, and the key is in no journal entry and no log line, nor is its base64', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
    const turns = await startRealTurns({
      replies: [],
      logger,
      coordinator: {
        maxAttempts: 1,
        modelRelay: relay,
        modelRoutes: { routesFor: () => new Map([['', route('model-key')]]) },
      },
    });
    try {
      const conversation = turns.conversations.add(
        { owner: TEST_OWNER.identity },
        { status: readyStatus(turns.harness.endpoint) },
      );
      const uid = conversation.metadata.uid ?? '';
      const reply = await turns.coordinator.postMessage(
        TEST_OWNER,
        { conversationId: uid, text: 'hello', idempotencyKey: 'k1' },
        AbortSignal.timeout(20_000),
      );
      expect(reply).toMatchObject({ status: 'complete', reply: 'rotated' });
      // A failing call too: its error travels to the harness and back into the log.
      await putSecret('model-key', { 'api-key': KEY });
      const failed = await turns.coordinator.postMessage(
        TEST_OWNER,
        { conversationId: uid, text: 'again', idempotencyKey: 'k2' },
        AbortSignal.timeout(20_000),
      );
      expect(failed).toMatchObject({ status: 'complete', fallback: true });
      const entries = await turns.journal.entries(`conv-${uid}`);
      expect(entries.map((e) => e.kind)).toContain('model_call');
      const journal = entries.map((e) => Buffer.from(e.payload).toString('latin1')).join('\n');
      const logs = lines.join('');
      expect(logs).toContain('turn settled');
      for (const secret of [KEY, ROTATED]) {
        for (const form of [secret, Buffer.from(secret).toString('base64')]) {
          expect(journal).not.toContain(form);
          expect(logs).not.toContain(form);
        }
      }
    } finally {
      await turns.close();
    }
  });
});
