import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { payloadCodecs } from '../../common/event-kinds';
import { pollUntil } from '../../hack/lib/processes';
import type { ControlPlaneProcess } from './support/control-plane';
import { CONTROL_PLANE_NAMESPACE } from './support/peer-pods';
import { postMessage, type ApiAnswer } from './support/public-api';
import { followStream, type StreamEvent } from './support/stream-follower';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// Turns resume by themselves (docs/turns.md, "Resuming interrupted turns"), on the real
// stack with two control-plane processes: after the replica holding a conversation is
// SIGKILLed or SIGTERMed, the other resumes its interrupted turn under the turn's id with
// no client action, and a stream that follows the conversation (reconnecting with
// Last-Event-ID, as EventSource does) sees `turn_resumed` and the turn through to
// `turn_complete`. A SIGTERMed replica drains; an approval's expiry is armed by the replica
// that takes the conversation over; and a rolling update of both replicas during 20
// running turns ends with every turn complete (or quarantined with its reason), no client
// having retried anything.

const OWNER = 'test:resume-owner';
/** Turns running during the rolling update (the number). */
const ROLLING_TURNS = Number(process.env.POLYCHROME_TEST_ROLLING_TURNS ?? 20);
/** SIGTERM's grace: 9 s of drain for the turns in flight, 3 s to close (operator/main.ts). */
const GRACE_MS = 12_000;
const DRAIN_MS = 9_000;
const APPROVAL_TTL_S = 20;

describe('turns resume by themselves', () => {
  let stack: TurnStack;
  let token: string;

  beforeAll(async () => {
    stack = await startTurnStack({
      namespacePrefix: 'resume',
      controlPlanes: 2,
      controlPlaneEnv: {
        POLYCHROME_SHUTDOWN_GRACE_MS: String(GRACE_MS),
        POLYCHROME_APPROVAL_TTL: `${APPROVAL_TTL_S}s`,
      },
    });
    token = await stack.mintToken(OWNER);
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
  });

  const running = (): string[] =>
    stack.controlPlanes.filter((cp) => cp.running).map((cp) => cp.apiUrl);
  const holderOf = async (uid: string): Promise<string> => {
    const lease = await stack.admin
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: CONTROL_PLANE_NAMESPACE, name: `conv-${uid}` });
    return lease.spec?.holderIdentity ?? '';
  };
  const plane = (identity: string): ControlPlaneProcess => {
    const found = stack.controlPlanes.find((cp) => cp.identity === identity);
    if (found === undefined) throw new Error(`no control plane ${identity}`);
    return found;
  };
  const other = (cp: ControlPlaneProcess): ControlPlaneProcess => {
    const found = stack.controlPlanes.find((p) => p !== cp);
    if (found === undefined) throw new Error('one control plane only');
    return found;
  };
  const dispatches = async (uid: string) =>
    (await stack.journal(uid))
      .filter((e) => e.kind === 'turn_dispatched')
      .map((e) => payloadCodecs.turn_dispatched.decode(e.payload));
  const postInBackground = (url: string, uid: string, text: string, key: string) =>
    postMessage(url, token, uid, text, key).catch((error: unknown) => error as Error);
  /** Waits until the journal holds `count` dispatches. */
  const waitDispatched = (uid: string, count = 1): Promise<true> =>
    pollUntil(
      `${count} dispatches in conv-${uid}`,
      async () => ((await dispatches(uid)).length >= count ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 50 },
    );
  /** Follows the stream until the turn of idempotency key `key` settles. */
  const followTurn = (uid: string, key: string, apiUrls = running, timeoutMs = 120_000) =>
    followStream({
      apiUrls,
      token,
      conversationId: uid,
      timeoutMs,
      until: (events) => settledOf(events, key) !== undefined,
    });
  /** Restarts a control plane that was stopped, and waits until it serves. */
  const startAgain = async (cp: ControlPlaneProcess): Promise<void> => {
    cp.start();
    await cp.waitReady(90_000);
  };

  it('resumes the turn of a SIGKILLed holder on the other replica, with no client action, and the stream sees it through', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('killed', { owner: OWNER });
      const holder = plane(await holderOf(uid));
      const survivor = other(holder);
      const stream = followTurn(uid, 'k-flight', () => [survivor.apiUrl]);
      const text = '[[slow:4000]] in flight when the holder dies';
      const pending = postInBackground(holder.apiUrl, uid, text, 'k-flight');
      await waitDispatched(uid);
      const killedAtMs = Date.now();
      await holder.kill('SIGKILL');
      await pending;

      // Nobody posts again: the survivor takes the Lease over and resumes the turn.
      const seen = await stream;
      const resumedAtMs = Date.now();
      const settled = settledOf(seen.events, 'k-flight');
      expect(settled?.event).toBe('turn_complete');
      expect(settled?.payload).toMatchObject({ text: `echo: ${text}` });
      const resumed = seen.events.filter((e) => e.event === 'turn_resumed');
      expect(resumed.map((e) => e.data)).toEqual([
        expect.objectContaining({ turnId: settled?.payload.turnId, attempt: 2 }),
      ]);
      // The stream shows it right after the dispatch it derives from, under the same id.
      const at = seen.events.indexOf(resumed[0]!);
      expect(seen.events[at - 1]).toMatchObject({ event: 'turn_dispatched', id: resumed[0]!.id });
      const all = await dispatches(uid);
      expect(all.map((d) => [d.attempt, d.leaseHolder, d.resumed])).toEqual([
        [1, holder.identity, false],
        [2, survivor.identity, true],
      ]);
      expect(all[1]!.fencingToken).toBeGreaterThan(all[0]!.fencingToken);
      // Within seconds: the lease (3 s) expires, the survivor takes it and resumes.
      expect(all[1]!.dispatchedAtMs - killedAtMs).toBeLessThan(15_000);
      expect(resumedAtMs - killedAtMs).toBeLessThan(30_000);
      const kinds = await stack.journalKinds(uid);
      expect(kinds.filter((k) => k === 'message_received')).toHaveLength(1);
      expect(kinds.filter((k) => k === 'turn_complete')).toHaveLength(1);
      expect((await stack.verify(uid)).ok).toBe(true);
      const resumedMetric = await metric(
        survivor,
        'polychrome_turns_resumed_total{outcome="complete"}',
      );
      expect(resumedMetric).toBeGreaterThanOrEqual(1);
      await startAgain(holder);
    });
  }, 240_000);

  it('arms an approval expiry on the replica that takes the conversation over, and it fires with no request', async () => {
    await stack.withDiagnostics(async () => {
      const uid = await stack.createConversation('expiry', {
        owner: OWNER,
        tools: { builtin: ['calculator'], requireApproval: ['calculator'] },
      });
      const holder = plane(await holderOf(uid));
      const survivor = other(holder);
      const paused = await postMessage(
        holder.apiUrl,
        token,
        uid,
        'compute [[tool:calculator {"expression":"6*7"}]]',
        'k-gated',
      );
      expect(paused.body).toMatchObject({ status: 'paused' });
      // The holder's timer dies with it; the survivor has never read this journal.
      await holder.kill('SIGKILL');
      const seen = await followTurn(
        uid,
        'k-gated',
        () => [survivor.apiUrl],
        APPROVAL_TTL_S * 1000 + 60_000,
      );
      const kinds = seen.events.map((e) => e.event);
      expect(kinds).toContain('approval_expired');
      expect(settledOf(seen.events, 'k-gated')?.event).toBe('turn_complete');
      const expired = seen.events.find((e) => e.event === 'approval_expired');
      const expiredPayload = (expired?.data as { payload?: { ttlMs?: unknown } }).payload;
      expect(Number(expiredPayload?.ttlMs)).toBe(APPROVAL_TTL_S * 1000);
      // The expiry's dispatch is the survivor's, and no turn was resumed for it: a paused
      // turn is not interrupted.
      const all = await dispatches(uid);
      expect(all.at(-1)).toMatchObject({ leaseHolder: survivor.identity, resumed: false });
      expect(kinds).not.toContain('turn_resumed');
      expect((await stack.verify(uid)).ok).toBe(true);
      await startAgain(holder);
    });
  }, 240_000);

  it('drains on SIGTERM: not ready at once, no new turn, the turns in flight finish or are handed over, the Leases released', async () => {
    await stack.withDiagnostics(async () => {
      // One replica holds both conversations: the other is stopped while they are made.
      const [first, second] = stack.controlPlanes as [ControlPlaneProcess, ControlPlaneProcess];
      await second.kill('SIGTERM');
      const quick = await stack.createConversation('drain-quick', { owner: OWNER });
      const long = await stack.createConversation('drain-long', { owner: OWNER });
      const idle = await stack.createConversation('drain-idle', { owner: OWNER });
      await startAgain(second);
      for (const uid of [quick, long, idle]) expect(await holderOf(uid)).toBe(first.identity);

      const longStream = followTurn(long, 'k-long');
      const quickText = '[[slow:2000]] finishes within the drain';
      const longText = `[[slow:${DRAIN_MS + 6_000}]] outlasts the drain`;
      const quickAnswer = postInBackground(first.apiUrl, quick, quickText, 'k-quick');
      const longAnswer = postInBackground(first.apiUrl, long, longText, 'k-long');
      await waitDispatched(quick);
      await waitDispatched(long);

      const exited = first.kill('SIGTERM', GRACE_MS + 5_000);
      await pollUntil(
        'not ready',
        async () => ((await first.readyz()) !== 200 ? true : undefined),
        {
          timeoutMs: 2_000,
          intervalMs: 20,
        },
      );
      // A new turn is refused while it drains: 503, Retry-After, saying why.
      const refused = await postMessage(first.apiUrl, token, idle, 'too late', 'k-late');
      expect(refused.status).toBe(503);
      expect(JSON.stringify(refused.body)).toContain('shutting down');
      const late = await fetch(`${first.apiUrl}/v1/conversations/${idle}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'too late', idempotencyKey: 'k-late' }),
      }).catch(() => undefined);
      if (late !== undefined) expect(late.headers.get('retry-after')).toBe('1');

      // The quick turn finishes here, and its caller gets the answer.
      const answered = (await quickAnswer) as ApiAnswer;
      expect(answered.status).toBe(200);
      expect(answered.body).toMatchObject({ status: 'complete', reply: `echo: ${quickText}` });
      expect((await dispatches(quick)).map((d) => d.attempt)).toEqual([1]);
      expect(await exited).toBe(0);
      // Released, not left to expire: the holder is cleared or already the other replica.
      for (const uid of [quick, long, idle]) {
        expect(await holderOf(uid)).not.toBe(first.identity);
      }
      // The long one was cancelled at the drain's end and is resumed by the other replica.
      const longCaller = await longAnswer;
      expect(longCaller instanceof Error || longCaller.status === 503).toBe(true);
      const seen = await longStream;
      expect(settledOf(seen.events, 'k-long')).toMatchObject({
        event: 'turn_complete',
        payload: expect.objectContaining({ text: `echo: ${longText}` }),
      });
      expect((await dispatches(long)).map((d) => [d.attempt, d.leaseHolder, d.resumed])).toEqual([
        [1, first.identity, false],
        [2, second.identity, true],
      ]);
      await startAgain(first);
    });
  }, 300_000);

  it(`rolls both replicas during ${ROLLING_TURNS} running turns: every turn completes or is quarantined with its reason, no client retries`, async () => {
    await stack.withDiagnostics(async () => {
      for (const cp of stack.controlPlanes) if (!cp.running) await startAgain(cp);
      const uids: string[] = [];
      for (let i = 0; i < ROLLING_TURNS; i += 5) {
        const batch = Array.from({ length: Math.min(5, ROLLING_TURNS - i) }, (_, j) =>
          stack.createConversation(`roll-${i + j}`, { owner: OWNER }, 120_000),
        );
        uids.push(...(await Promise.all(batch)));
      }
      // Longer than the drain: the turns a replica holds when it is rolled are handed over.
      const texts = uids.map((_, i) => `[[slow:${DRAIN_MS + 3_000}]] rolling turn ${i}`);
      const streams = uids.map((uid, i) => followTurn(uid, `k-roll-${i}`, running, 300_000));
      // Each message is posted once, to either replica; nobody posts again.
      const answers = uids.map((uid, i) =>
        postInBackground(stack.controlPlane(i % 2).apiUrl, uid, texts[i]!, `k-roll-${i}`),
      );
      for (const uid of uids) await waitDispatched(uid);

      for (const cp of stack.controlPlanes) {
        expect(await cp.kill('SIGTERM', GRACE_MS + 5_000)).toBe(0);
        await startAgain(cp);
      }

      const seen = await Promise.all(streams);
      await Promise.all(answers);
      let resumedTurns = 0;
      for (const [i, uid] of uids.entries()) {
        const settled = settledOf(seen[i]!.events, `k-roll-${i}`);
        if (settled?.event === 'turn_ambiguous') {
          expect(settled.payload.reason).toEqual(expect.any(String));
          expect(String(settled.payload.reason)).not.toBe('');
        } else {
          expect(settled).toMatchObject({
            event: 'turn_complete',
            payload: expect.objectContaining({ text: `echo: ${texts[i]}` }),
          });
        }
        const kinds = await stack.journalKinds(uid);
        expect(kinds.filter((k) => k === 'message_received')).toHaveLength(1);
        expect(kinds.filter((k) => k === 'turn_complete' || k === 'turn_ambiguous')).toHaveLength(
          1,
        );
        const all = await dispatches(uid);
        expect(all.map((d) => d.attempt)).toEqual(all.map((_, n) => n + 1));
        // Every dispatch after the first ran the interrupted turn again, and the stream said so.
        expect(all.slice(1).every((d) => d.resumed)).toBe(true);
        const streamed = seen[i]!.events.filter((e) => e.event === 'turn_resumed');
        expect(streamed).toHaveLength(all.length - 1);
        resumedTurns += all.length > 1 ? 1 : 0;
        expect((await stack.verify(uid)).ok).toBe(true);
      }
      // The roll interrupted turns (the drain is shorter than what was left of them).
      expect(resumedTurns).toBeGreaterThan(0);
    });
  }, 900_000);
});

/** The settling event (`turn_complete` or `turn_ambiguous`) of the turn of idempotency key `key`. */
function settledOf(
  events: readonly StreamEvent[],
  key: string,
): { event: string; payload: Record<string, unknown> } | undefined {
  const payloadOf = (e: StreamEvent): Record<string, unknown> =>
    (e.data as { payload?: Record<string, unknown> } | undefined)?.payload ?? {};
  const message = events.find(
    (e) => e.event === 'message_received' && payloadOf(e).idempotencyKey === key,
  );
  if (message === undefined) return undefined;
  const turnId = payloadOf(message).turnId;
  const settled = events.find(
    (e) =>
      (e.event === 'turn_complete' || e.event === 'turn_ambiguous') &&
      payloadOf(e).turnId === turnId,
  );
  return settled === undefined ? undefined : { event: settled.event, payload: payloadOf(settled) };
}

/** A sample of the replica's /metrics, 0 when absent. */
async function metric(cp: ControlPlaneProcess, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${cp.healthPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}
