import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CoordinationV1Api,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  V1MicroTime,
} from '@kubernetes/client-node';
import { createServer, type Server } from 'node:net';
import { payloadCodecs } from '../../common/event-kinds';
import { pollUntil } from '../../hack/lib/processes';
import { sharedCluster } from './support/kube';
import { CONTROL_PLANE_POD_LABELS } from '../../operator/public-api/peer-endpoints';
import {
  CONTROL_PLANE_NAMESPACE,
  deleteProcessPod,
  PEER_HOST,
  writeProcessPod,
} from './support/peer-pods';
import { apiCall, postMessage, postUntilSettled, type ApiAnswer } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// Two control-plane replicas on the real stack: any replica accepts a message and the
// lease holder runs it (the other forwards over the peer hop, to the holder's Pod in the
// control plane's namespace); a namespace editor cannot reach the conversation's Lease (it
// is in the control plane's namespace), and a Lease rewritten anyway, or a Pod they create,
// send no request and no token anywhere else; a SIGKILLed holder's turn is recovered by the survivor under its
// original id once the lease expires, with a higher fencing token; a restarted replica
// serves again.

type Answer = ApiAnswer;

describe('turns with two control-plane replicas', () => {
  let stack: TurnStack;
  let token: string;

  const post = (apiUrl: string, uid: string, text: string, key: string): Promise<Answer> =>
    postMessage(apiUrl, token, uid, text, key);
  const settle = (apiUrl: string, uid: string, text: string, key: string): Promise<Answer> =>
    postUntilSettled(apiUrl, token, uid, text, key);
  const dispatches = async (
    uid: string,
  ): Promise<{ holder: string; fencing: number; attempt: number; turnId: string }[]> =>
    (await stack.journal(uid))
      .filter((e) => e.kind === 'turn_dispatched')
      .map((e) => payloadCodecs.turn_dispatched.decode(e.payload))
      .map((d) => ({
        holder: d.leaseHolder,
        fencing: d.fencingToken,
        attempt: d.attempt,
        turnId: d.turnId,
      }));

  beforeAll(async () => {
    stack = await startTurnStack({ namespacePrefix: 'replicas', controlPlanes: 2 });
    token = await stack.mintToken('test:replica-owner');
  }, 150_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('takes a message on either replica and runs it on the lease holder', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('either', { owner: 'test:replica-owner' });
      const a = await post(stack.controlPlane(0).apiUrl, uid, 'via zero', 'k-a');
      const b = await post(stack.controlPlane(1).apiUrl, uid, 'via one', 'k-b');
      expect([a.status, b.status]).toEqual([200, 200]);
      expect(a.body.reply).toBe('echo: via zero');
      expect(b.body.reply).toBe('echo: via one');
      const holders = new Set((await dispatches(uid)).map((d) => d.holder));
      // One writer for both turns, whichever replica the client reached.
      expect(holders.size).toBe(1);
      // Exactly one of the two answers was relayed from the other replica.
      const relayed = [a.servedBy, b.servedBy].filter((s) => s !== null);
      expect(relayed).toHaveLength(1);
      const [holder] = [...holders];
      expect(relayed).toEqual([holder]);
      // It reached the holder on its peer listener, which answers any request that carries
      // an Authorization header with 400 (peer-hop.test.ts): the holder never saw the token.
      const holderPlane = stack.controlPlanes.find((cp) => cp.identity === holder);
      const peerLines = (holderPlane?.log.lines ?? []).filter(
        (l) => l.includes('"listener":"peer"') && l.includes('"msg":"request served"'),
      );
      expect(peerLines).toHaveLength(1);
      expect(peerLines[0]).toContain('"status":200');
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  });

  it('keeps the Lease from a namespace editor, and sends no request and no token to an address on the Lease or a Pod', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('lease-attack', { owner: 'test:replica-owner' });
      await post(stack.controlPlane(0).apiUrl, uid, 'warm up', 'k-warm');
      const [warm] = await dispatches(uid);
      const holder = stack.controlPlanes.find((cp) => cp.identity === warm!.holder)!;
      const other = stack.controlPlanes.find((cp) => cp.identity !== warm!.holder)!;

      // Listeners the attacker controls, on loopback (where the replicas' peer listeners are
      // too): they count every TCP connection and byte.
      const seen = { connections: 0, bytes: 0 };
      const listeners: Server[] = [];
      const listen = async (host: string): Promise<number> => {
        const server = createServer((socket) => {
          seen.connections += 1;
          socket.on('data', (chunk: Buffer) => (seen.bytes += chunk.length));
          socket.on('error', () => undefined);
        });
        listeners.push(server);
        await new Promise<void>((resolve) => server.listen(0, host, resolve));
        const address = server.address();
        return typeof address === 'object' && address !== null ? address.port : 0;
      };
      const loopPort = await listen(PEER_HOST);
      const peerPort = await listen(PEER_HOST);
      // Pods that look like a replica's and point at the attacker's listener, but are not
      // the control plane's: one a namespace editor creates in the conversation's namespace
      // (a kubelet would run it and report it Ready; the admin stands in for that), one in
      // the control plane's namespace without the control-plane labels.
      const editor = await editorKubeConfig(stack);
      const decoys = [
        { namespace: stack.namespace, name: 'attacker', labels: CONTROL_PLANE_POD_LABELS },
        {
          namespace: CONTROL_PLANE_NAMESPACE,
          name: `${stack.namespace}-unlabelled`,
          labels: { 'app.kubernetes.io/name': 'polychrome-test-decoy' },
        },
      ];
      try {
        for (const decoy of decoys) {
          await writeProcessPod(stack.admin, {
            ...decoy,
            peerPort,
            podIP: PEER_HOST,
            ...(decoy.namespace === stack.namespace ? { creator: editor } : {}),
          });
        }
        const leaseName = `conv-${uid}`;
        // 0. A user with the built-in edit role in the conversation's namespace, nothing
        // more, tries what once locked a conversation for eleven days: the Lease rewritten
        // to another holder and a duration of 999999 s. There is no Lease in its namespace,
        // and the control plane's refuses it.
        const editorLeases = editor.makeApiClient(CoordinationV1Api);
        expect(
          (await editorLeases.listNamespacedLease({ namespace: stack.namespace })).items,
        ).toEqual([]);
        await expect(
          editorLeases.readNamespacedLease({ namespace: CONTROL_PLANE_NAMESPACE, name: leaseName }),
        ).rejects.toMatchObject({ code: 403 });
        await expect(
          editorLeases.patchNamespacedLease(
            {
              namespace: CONTROL_PLANE_NAMESPACE,
              name: leaseName,
              body: {
                spec: { holderIdentity: 'mallory-was-here', leaseDurationSeconds: 999_999 },
              },
            },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          ),
        ).rejects.toMatchObject({ code: 403 });
        const unharmed = await post(other.apiUrl, uid, 'after the attempt', 'k-after-attempt');
        expect(unharmed.status).toBe(200);
        expect(unharmed.body.reply).toBe('echo: after the attempt');

        // From here on the Lease is rewritten as only the control plane's own identity (or
        // a cluster admin) could: should it ever name something other than a replica,
        // forwarding still goes to control-plane Pods only.
        const leases = stack.admin.makeApiClient(CoordinationV1Api);
        // The holder renews its Lease every second, so a read and a replace can straddle a
        // renewal: the API server then answers 409 (the write named an older
        // resourceVersion), and the rewrite is made again on the newest one, as a writer
        // that means to win does.
        const rewrite = async (holderIdentity: string): Promise<void> => {
          for (let attempt = 1; ; attempt++) {
            try {
              await rewriteOnce(holderIdentity);
              return;
            } catch (error) {
              if ((error as { code?: number }).code !== 409 || attempt >= 10) throw error;
            }
          }
        };
        const rewriteOnce = async (holderIdentity: string): Promise<void> => {
          const lease = await leases.readNamespacedLease({
            namespace: CONTROL_PLANE_NAMESPACE,
            name: leaseName,
          });
          await leases.replaceNamespacedLease({
            namespace: CONTROL_PLANE_NAMESPACE,
            name: leaseName,
            body: {
              ...lease,
              metadata: {
                ...lease.metadata,
                annotations: {
                  'polychrome.dev/api-endpoint': `http://127.0.0.1:${loopPort}`,
                  'polychrome.dev/peer-endpoint': `https://${PEER_HOST}:${peerPort}`,
                },
              },
              spec: {
                ...lease.spec,
                holderIdentity,
                leaseDurationSeconds: 3600,
                renewTime: new V1MicroTime(Date.now()),
              },
            },
          });
        };

        // 1. A holder no control-plane pod is: the editor's Pod, the unlabelled one, a name
        // no pod has, or one that looks like the attacker's address.
        const forgeries = [
          ...decoys.map((d) => d.name),
          'no-such-replica',
          `${PEER_HOST}:${loopPort}`,
          `https://${PEER_HOST}:${peerPort}`,
        ];
        const notForwarded =
          /no Ready pod of that name is among the control-plane pods \(app.kubernetes.io\/name=polychrome-control-plane\) of namespace polychrome-system/;
        for (const [i, forged] of forgeries.entries()) {
          await rewrite(forged);
          // The old holder notices at its next renewal (1 s) that the lease is no longer its
          // own; until then it may still run the turn, or lose the lease during it (a 503 too).
          let last: Answer[] = [];
          const refused = await pollUntil(
            `both replicas to refuse forwarding to ${forged}`,
            async () => {
              last = await Promise.all(
                [holder, other].map((cp) => post(cp.apiUrl, uid, `to ${forged}`, `k-forged-${i}`)),
              );
              return last.every(
                (a) => a.status === 503 && notForwarded.test(JSON.stringify(a.body)),
              )
                ? last
                : undefined;
            },
            { timeoutMs: 15_000, intervalMs: 300 },
          ).catch((err: unknown) => {
            throw new Error(`${String(err)}; last answers: ${JSON.stringify(last)}`);
          });
          for (const answer of refused) {
            expect(JSON.stringify(answer.body)).toMatch(notForwarded);
            expect(JSON.stringify(answer.body)).toMatch(/same idempotency key/);
            expect(answer.servedBy).toBeNull();
          }
        }

        // 2. The other real replica named as holder: served through it, never the attacker.
        await rewrite(other.identity);
        const served = await pollUntil(
          'the request to be served through the named replica',
          async () => {
            const a = await post(holder.apiUrl, uid, 'through the named replica', 'k-named');
            return a.status === 200 ? a : undefined;
          },
          { timeoutMs: 15_000, intervalMs: 300 },
        );
        expect(served.body.reply).toBe('echo: through the named replica');
        expect(served.servedBy).toBe(other.identity);

        // 3. A caller forged onto the public port, as a replica would send it, is refused.
        const forged = await apiCall(holder.apiUrl, 'POST', `/v1/conversations/${uid}/messages`, {
          body: {
            caller: {
              identity: 'test:root',
              identities: ['test:root'],
              personaId: 'p',
              roles: ['admin'],
              sessionId: 's',
            },
            body: { text: 'x' },
          },
          headers: { 'x-polychrome-forwarded': 'forged' },
        });
        expect(forged.status).toBe(401);

        expect(seen).toEqual({ connections: 0, bytes: 0 });
      } finally {
        for (const decoy of decoys) {
          await deleteProcessPod(stack.admin, decoy.namespace, decoy.name);
        }
        await Promise.all(listeners.map((l) => new Promise((resolve) => l.close(resolve))));
      }
    });
  });

  it('recovers a turn of a SIGKILLed holder on the survivor, fenced, and serves again after a restart', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('takeover', { owner: 'test:replica-owner' });
      await post(stack.controlPlane(0).apiUrl, uid, 'warm up', 'k-warm');
      const [warm] = await dispatches(uid);
      const holderIndex = stack.controlPlanes.findIndex((cp) => cp.identity === warm!.holder);
      expect(holderIndex).toBeGreaterThanOrEqual(0);
      const holder = stack.controlPlane(holderIndex);
      const survivor = stack.controlPlane(1 - holderIndex);

      const text = '[[slow:3000]] in flight when the holder dies';
      const pending = post(holder.apiUrl, uid, text, 'k-flight').catch((e: unknown) => e);
      await pollUntil(
        'the second dispatch',
        async () => ((await dispatches(uid)).length >= 2 ? true : undefined),
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      await holder.kill('SIGKILL');
      await pending;

      const answer = await settle(survivor.apiUrl, uid, text, 'k-flight');
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ status: 'complete', reply: `echo: ${text}` });
      const all = await dispatches(uid);
      const flight = all.filter((d) => d.turnId === answer.body.turnId);
      expect(flight.map((d) => d.attempt)).toEqual([1, 2]);
      expect(flight[0]!.holder).toBe(holder.identity);
      expect(flight[1]!.holder).toBe(survivor.identity);
      expect(flight[1]!.fencing).toBeGreaterThan(flight[0]!.fencing);
      const kinds = await stack.journalKinds(uid);
      expect(kinds.filter((k) => k === 'message_received')).toHaveLength(2);
      expect(kinds.filter((k) => k === 'turn_complete')).toHaveLength(2);

      holder.start();
      await holder.waitReady();
      const after = await settle(holder.apiUrl, uid, 'back again', 'k-back');
      expect(after.body).toMatchObject({ status: 'complete', reply: 'echo: back again' });
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  });
});

/**
 * A kubeconfig for a user bound to the built-in `edit` ClusterRole in the stack's namespace
 * only: what "anyone who can edit a namespace" holds.
 */
async function editorKubeConfig(stack: TurnStack): Promise<KubeConfig> {
  const user = `test-editor-${stack.namespace}`;
  await stack.admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: stack.namespace,
    body: {
      metadata: { name: 'test-editor' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    },
  });
  const kc = new KubeConfig();
  kc.loadFromFile(await (await sharedCluster()).mintUser(user));
  return kc;
}
