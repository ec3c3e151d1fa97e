import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { payloadCodecs } from '../../common/event-kinds';
import { pollUntil } from '../../hack/lib/processes';
import { CONTROL_PLANE_NAMESPACE } from './support/peer-pods';
import { postMessage, type ApiAnswer } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// Two real control-plane processes: a replica that still believes it holds a
// conversation's lease after another replica took it over writes nothing to the journal,
// even where the compare-and-swap on the head alone would let it through.
//
// The stale holder stands for a replica paused (a GC pause, a frozen VM) past its lease:
// the lease moved on while its own clock says it still holds it. The test makes that state
// directly. Renewals are 10 s apart; right after one, the lease's holder is cleared on the
// API server, as a release would leave it, and the other replica takes it over (one more
// transition, so a higher fencing token). Until its next renewal the old holder goes on
// acting on the lease it thinks it has.

const LEASE_MS = 20_000;
const RENEW_MS = 10_000;

describe('fencing with two control-plane replicas', () => {
  let stack: TurnStack;
  let token: string;

  const post = (apiUrl: string, uid: string, text: string, key: string): Promise<ApiAnswer> =>
    postMessage(apiUrl, token, uid, text, key);
  const dispatches = async (
    uid: string,
  ): Promise<{ holder: string; fencing: number; turnId: string }[]> =>
    (await stack.journal(uid))
      .filter((e) => e.kind === 'turn_dispatched')
      .map((e) => payloadCodecs.turn_dispatched.decode(e.payload))
      .map((d) => ({ holder: d.leaseHolder, fencing: d.fencingToken, turnId: d.turnId }));
  const texts = async (uid: string): Promise<string[]> =>
    (await stack.journal(uid))
      .filter((e) => e.kind === 'message_received')
      .map((e) => payloadCodecs.message_received.decode(e.payload).text);

  beforeAll(async () => {
    stack = await startTurnStack({
      namespacePrefix: 'fencing',
      controlPlanes: 2,
      leaseDurationMs: LEASE_MS,
      controlPlaneEnv: { POLYCHROME_LEASE_RENEW_MS: String(RENEW_MS) },
    });
    token = await stack.mintToken('test:fencing-owner');
  }, 150_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('commits nothing the old holder sends after the new holder took over', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('fenced', { owner: 'test:fencing-owner' });
      const warm = await post(stack.controlPlane(0).apiUrl, uid, 'warm up', 'k-warm');
      // Status and body, so a refusal shows why.
      expect([warm.status, warm.body]).toEqual([200, expect.anything()]);
      const [first] = await dispatches(uid);
      const oldIndex = stack.controlPlanes.findIndex((cp) => cp.identity === first!.holder);
      expect(oldIndex).toBeGreaterThanOrEqual(0);
      const old = stack.controlPlane(oldIndex);
      const next = stack.controlPlane(1 - oldIndex);

      // Wait for one of the old holder's renewals: its next one is RENEW_MS away.
      const leases = stack.admin.makeApiClient(CoordinationV1Api);
      const name = `conv-${uid}`;
      const read = (): ReturnType<typeof leases.readNamespacedLease> =>
        leases.readNamespacedLease({ namespace: CONTROL_PLANE_NAMESPACE, name });
      // Nothing but its renewals writes the Lease now: a new resourceVersion is one.
      const seen = (await read()).metadata?.resourceVersion;
      const renewed = await pollUntil(
        'a renewal by the old holder',
        async () => {
          const lease = await read();
          return lease.metadata?.resourceVersion !== seen ? lease : undefined;
        },
        { timeoutMs: RENEW_MS + 5_000, intervalMs: 100 },
      );
      const windowEndsAt = Date.now() + RENEW_MS - 1_000;
      expect(renewed.spec?.holderIdentity).toBe(old.identity);
      await leases.replaceNamespacedLease({
        namespace: CONTROL_PLANE_NAMESPACE,
        name,
        body: { ...renewed, spec: { ...renewed.spec, holderIdentity: '' } },
      });

      // The new holder takes the lease over and commits a turn.
      const taken = await post(next.apiUrl, uid, 'from the new holder', 'k-new');
      expect([taken.status, taken.body]).toEqual([200, expect.anything()]);
      expect(taken.body).toMatchObject({ status: 'complete', reply: 'echo: from the new holder' });
      const afterTakeOver = await dispatches(uid);
      const newDispatch = afterTakeOver.at(-1)!;
      expect(newDispatch.holder).toBe(next.identity);
      expect(newDispatch.fencing).toBeGreaterThan(first!.fencing);
      const headBefore = (await stack.journal(uid)).length;

      // The old holder, still sure of its lease, is asked twice: first from its cached
      // view (a stale head), then again, when it has re-read the journal and appends at
      // the current head, where only the fence can stop it.
      const stale = [
        await post(old.apiUrl, uid, 'from the old holder', 'k-stale'),
        await post(old.apiUrl, uid, 'from the old holder', 'k-stale'),
      ];
      // Both within the window in which the old holder still believes it holds the lease.
      expect(Date.now()).toBeLessThan(windowEndsAt);
      for (const answer of stale) {
        expect(answer.servedBy).toBeNull();
        expect(answer.status).toBe(503);
        expect(answer.body).toMatchObject({ error: { code: 'unavailable' } });
        expect(JSON.stringify(answer.body)).toContain(
          `this replica lost the lease of conversation ${uid}`,
        );
        expect(JSON.stringify(answer.body)).toContain('retry with the same idempotency key');
      }

      // Nothing of the old holder's reached the journal.
      const journal = await stack.journal(uid);
      expect(journal).toHaveLength(headBefore);
      expect(await texts(uid)).toEqual(['warm up', 'from the new holder']);
      expect((await dispatches(uid)).filter((d) => d.holder === old.identity)).toEqual([first]);
      expect((await stack.verify(uid)).ok).toBe(true);

      // The retry the answer promised is safe: the new holder runs the message once.
      const retried = await post(next.apiUrl, uid, 'from the old holder', 'k-stale');
      expect(retried.status).toBe(200);
      expect(retried.body).toMatchObject({
        status: 'complete',
        reply: 'echo: from the old holder',
      });
      expect(await texts(uid)).toEqual(['warm up', 'from the new holder', 'from the old holder']);
    });
  });

  it('moves a Lease that started over below the journal’s fence past it, and the turn goes on', async () => {
    await stack.withDiagnostics(async () => {
      // What an upgrade from Leases in conversation namespaces leaves (or a deleted Lease):
      // a journal whose fencing mark is above 0, and no Lease in the control plane's
      // namespace, so the next one starts at 0 again.
      const uid = await stack.createConversation('started-over', {
        owner: 'test:fencing-owner',
      });
      const warm = await post(stack.controlPlane(0).apiUrl, uid, 'warm up', 'k-warm');
      // Status and body, so a refusal shows why.
      expect([warm.status, warm.body]).toEqual([200, expect.anything()]);
      const [first] = await dispatches(uid);
      const leases = stack.admin.makeApiClient(CoordinationV1Api);
      const name = `conv-${uid}`;
      // Released on the API server: the replica that did not hold it takes it over (one
      // more transition) and writes, so the journal's mark rises above 0.
      const lease = await leases.readNamespacedLease({ namespace: CONTROL_PLANE_NAMESPACE, name });
      await leases.replaceNamespacedLease({
        namespace: CONTROL_PLANE_NAMESPACE,
        name,
        body: { ...lease, spec: { ...lease.spec, holderIdentity: '' } },
      });
      const next = stack.controlPlanes.find((cp) => cp.identity !== first!.holder)!;
      const taken = await post(next.apiUrl, uid, 'taken over', 'k-taken');
      expect([taken.status, taken.body]).toEqual([200, expect.anything()]);
      const mark = (await dispatches(uid)).at(-1)!.fencing;
      expect(mark).toBeGreaterThan(0);

      // Both replicas die without releasing anything, the Lease goes, and they come back.
      await Promise.all(stack.controlPlanes.map((cp) => cp.kill('SIGKILL')));
      await leases.deleteNamespacedLease({ namespace: CONTROL_PLANE_NAMESPACE, name });
      for (const cp of stack.controlPlanes) cp.start();
      for (const cp of stack.controlPlanes) await cp.waitReady();

      // The new Lease starts at token 0, below the mark: the holder moves it past the mark
      // and the message is answered, not refused as fenced.
      const after = await post(stack.controlPlane(0).apiUrl, uid, 'after the restart', 'k-after');
      expect([after.status, after.body]).toEqual([200, expect.anything()]);
      expect(after.body).toMatchObject({ status: 'complete', reply: 'echo: after the restart' });
      const last = (await dispatches(uid)).at(-1)!;
      expect(last.fencing).toBe(mark + 1);
      const now = await leases.readNamespacedLease({ namespace: CONTROL_PLANE_NAMESPACE, name });
      expect(now.spec).toMatchObject({ holderIdentity: last.holder, leaseTransitions: mark + 1 });
      expect(await texts(uid)).toEqual(['warm up', 'taken over', 'after the restart']);
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  });
});
