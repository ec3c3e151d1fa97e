import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { payloadCodecs } from '../../common/event-kinds';
import { pollUntil } from '../../hack/lib/processes';
import { postMessage, postUntilSettled, type ApiAnswer } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// Two control-plane replicas on the real stack: any replica accepts a message and the
// lease holder runs it (the other forwards); a SIGKILLed holder's turn is recovered by the
// survivor under its original id once the lease expires, with a higher fencing token; a
// restarted replica serves again.

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
      expect([a.servedBy, b.servedBy].filter((s) => s !== null)).toHaveLength(1);
      expect((await stack.verify(uid)).ok).toBe(true);
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
