/**
 * A warm pool deleted while the controller still reuses its last read (cached-reads.ts:
 * shared objects are read at most once per `sharedReadTtlMs`, and nothing watches them). A
 * Conversation made in that window is planned from the stale read and gets a claim; the
 * agent-sandbox claim controller then reports `WarmPoolNotFound`, and no event follows.
 * The pass that sees that disagreement looks again once its read is stale
 * (plan.ts, `staleReadRecheckMs`), so the Conversation reports the missing pool and what to
 * do, instead of waiting until the next resync. On the shared API server, with the real
 * agent-sandbox controller.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { ConversationResource } from '../../operator/api/v1alpha1/conversation-types';
import { validMinimalConversationSpec } from '../../operator/api/v1alpha1/conversation-cases';
import { ConversationController } from '../../operator/controller/conversation-controller';
import { pollUntil } from '../../hack/lib/processes';
import {
  createConversationObject,
  dropConversationFinalizers,
  field,
  freshNamespace,
  kubeConfig,
} from './support/kube';
import { sandboxExtensions as ext } from './support/sandbox';

const { group, version, plural } = ConversationResource;
/** Long enough that the second Conversation's passes all fall inside one read's life. */
const SHARED_READ_TTL_MS = 6_000;
const POOL = 'short-lived-pool';

describe('a warm pool deleted while its last read is reused', () => {
  let kc: KubeConfig;
  let ns: { name: string; dispose: () => Promise<void> };
  let objects: CustomObjectsApi;
  let controller: ConversationController;

  beforeAll(async () => {
    kc = await kubeConfig();
    ns = await freshNamespace(kc, 'stalepool');
    objects = kc.makeApiClient(CustomObjectsApi);
    const body = (kind: string, name: string, spec: Record<string, unknown>) => ({
      apiVersion: `${ext.group}/${ext.version}`,
      kind,
      metadata: { name },
      spec,
    });
    await objects.createNamespacedCustomObject({
      ...ext,
      namespace: ns.name,
      plural: 'sandboxtemplates',
      body: body('SandboxTemplate', 'short-lived-template', {
        podTemplate: {
          spec: { containers: [{ name: 'harness', image: 'polychrome/harness:dev' }] },
        },
      }),
    });
    await objects.createNamespacedCustomObject({
      ...ext,
      namespace: ns.name,
      plural: 'sandboxwarmpools',
      body: body('SandboxWarmPool', POOL, {
        replicas: 0,
        sandboxTemplateRef: { name: 'short-lived-template' },
      }),
    });
    controller = new ConversationController({
      kubeConfig: kc,
      logger: pino({ level: process.env['POLYCHROME_TEST_LOG'] ?? 'silent' }),
      namespace: ns.name,
      baseDelayMs: 50,
      maxDelayMs: 2_000,
      sharedReadTtlMs: SHARED_READ_TTL_MS,
      // A Conversation blocked on the pool looks again only after the test's wait: what
      // the test sees comes from the stale-read recheck, not from this one.
      blockedRecheckMs: 10 * 60_000,
    });
    await controller.start();
  });

  afterAll(async () => {
    await controller?.close();
    if (ns !== undefined) {
      await dropConversationFinalizers(kc, ns.name);
      await ns.dispose();
    }
  });

  const spec = { ...validMinimalConversationSpec, sandbox: { warmPool: POOL } };
  const get = (name: string): Promise<unknown> =>
    objects.getNamespacedCustomObject({ group, version, plural, namespace: ns.name, name });
  const claimOf = (name: string): Promise<unknown> =>
    objects
      .getNamespacedCustomObject({ ...ext, plural: 'sandboxclaims', namespace: ns.name, name })
      .catch((err: unknown) => {
        if (err instanceof ApiException && err.code === 404) return undefined;
        throw err;
      });
  const degradedReason = async (name: string): Promise<unknown> => {
    const conditions = field(await get(name), 'status', 'conditions');
    const degraded: unknown = Array.isArray(conditions)
      ? (conditions as unknown[]).find((c) => field(c, 'type') === 'Degraded')
      : undefined;
    return field(degraded, 'reason');
  };

  it('a Conversation planned from the stale read reports the missing pool once the read is stale', async () => {
    // The first Conversation's pass reads the pool: that read is reused for a while.
    await createConversationObject(kc, ns.name, 'before', spec);
    await pollUntil('the claim of the first Conversation', () => claimOf('before'), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    await objects.deleteNamespacedCustomObject({
      ...ext,
      namespace: ns.name,
      plural: 'sandboxwarmpools',
      name: POOL,
    });
    const madeAt = Date.now();
    await createConversationObject(kc, ns.name, 'after', spec);

    // The claim controller says the pool is gone before our read is stale.
    await pollUntil(
      "the claim controller's WarmPoolNotFound",
      async () => {
        const conditions = field(await claimOf('after'), 'status', 'conditions');
        return Array.isArray(conditions) &&
          conditions.some((c) => field(c, 'reason') === 'WarmPoolNotFound')
          ? true
          : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const reason = await pollUntil(
      'the second Conversation to report its warm pool missing',
      async () => {
        const found = await degradedReason('after');
        return found === 'WarmPoolMissing' ? found : undefined;
      },
      { timeoutMs: 3 * SHARED_READ_TTL_MS, intervalMs: 200 },
    );
    expect(reason).toBe('WarmPoolMissing');
    // Not before the read it was planned from could be stale, and not much later.
    expect(Date.now() - madeAt).toBeLessThan(3 * SHARED_READ_TTL_MS);
  }, 90_000);
});
