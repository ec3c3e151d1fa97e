import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Role } from '../../common/persona-roles';
import { Watch } from '@kubernetes/client-node';
import { join } from 'node:path';
import { canonicalJson } from '../../common/canonical-json';
import { repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { apiCall, postMessage, type ApiAnswer } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// How many times a turn writes a Conversation's status, counted by the API server: a watch
// on the object sees every resourceVersion, and each one whose status differs from the one
// before is one status write, by whoever made it (the turn code or the reconciler). The
// expected counts are the table in docs/operator.md ("Status writes"); they are exact.
//
// The running mark of a turn waits POLYCHROME_TURN_STATUS_DELAY_MS (3 s here, so a turn of
// the echo model always settles within it, however loaded the machine is; the default is
// 250 ms) and writes of one conversation are at least POLYCHROME_TURN_STATUS_INTERVAL_MS
// (1 s) apart.

/** The fields only the turn code writes: a write that changes one is the turn code's. */
const TURN_FIELDS = ['currentTurn', 'turns', 'lastTurnTime', 'journal'] as const;

interface StatusWrite {
  readonly by: 'turn code' | 'reconciler';
  readonly phase: string;
  readonly status: Record<string, unknown>;
}

/** Every status change of one Conversation the API server reports, from `start` on. */
class StatusWrites {
  readonly writes: StatusWrite[] = [];
  private last: Record<string, unknown> | undefined;
  private abort: AbortController | undefined;
  private lastChangeMs = Date.now();
  error: unknown;

  private constructor(private readonly generationSeen: number[]) {}

  static async start(stack: TurnStack, name: string): Promise<StatusWrites> {
    const writes = new StatusWrites([]);
    writes.abort = await new Watch(stack.admin).watch(
      `/apis/polychrome.dev/v1alpha1/namespaces/${stack.namespace}/conversations`,
      { fieldSelector: `metadata.name=${name}` },
      (type: string, obj: { metadata?: { generation?: number }; status?: unknown }) => {
        if (type !== 'ADDED' && type !== 'MODIFIED') return;
        writes.generationSeen.push(obj.metadata?.generation ?? 0);
        const status = (obj.status ?? {}) as Record<string, unknown>;
        const before = writes.last;
        writes.last = status;
        if (before === undefined || canonicalJson(before) === canonicalJson(status)) return;
        const turn = TURN_FIELDS.some(
          (f) => canonicalJson(before[f] ?? null) !== canonicalJson(status[f] ?? null),
        );
        writes.lastChangeMs = Date.now();
        writes.writes.push({
          by: turn ? 'turn code' : 'reconciler',
          phase: typeof status.phase === 'string' ? status.phase : '',
          status,
        });
      },
      (err: unknown) => {
        if (err !== null && err !== undefined && writes.abort?.signal.aborted !== true) {
          writes.error = err;
        }
      },
    );
    // The watch's first event is the object as it is: the baseline.
    await pollUntil('the watch baseline', () => Promise.resolve(writes.last ?? undefined), {
      timeoutMs: 10_000,
      intervalMs: 20,
    });
    return writes;
  }

  /** Resolves once nothing changed the status for `quietMs`. */
  async quiet(quietMs: number): Promise<void> {
    await pollUntil(
      `no status write for ${quietMs} ms`,
      () => Promise.resolve(Date.now() - this.lastChangeMs >= quietMs ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 100 },
    );
  }

  /** Who wrote, in order, and the phase each write left. */
  summary(): string[] {
    return this.writes.map((w) => `${w.by}: ${w.phase}`);
  }

  stop(): void {
    this.abort?.abort();
    // A spec change would also be a resourceVersion; none may happen here.
    expect(new Set(this.generationSeen).size).toBe(1);
    expect(this.error).toBeUndefined();
  }
}

describe('Conversation status writes per turn, counted at the API server', () => {
  let stack: TurnStack;
  let owner: string;
  let admin: string;
  const QUIET_MS = 3_000;

  beforeAll(async () => {
    stack = await startTurnStack({
      namespacePrefix: 'status',
      controlPlaneEnv: {
        POLYCHROME_TURN_STATUS_DELAY_MS: '3000',
        POLYCHROME_TURN_STATUS_INTERVAL_MS: '1000',
      },
    });
    owner = await stack.mintToken('test:owner');
    admin = await stack.mintToken('test:admin', [Role.Admin]);
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  /** Creates a Ready conversation and counts its status writes from when it is quiet. */
  async function counted(
    name: string,
    spec: Readonly<Record<string, unknown>>,
    run: (uid: string) => Promise<void>,
    warm?: (uid: string) => Promise<void>,
  ): Promise<StatusWrites> {
    const uid = await stack.createConversation(name, { owner: 'test:owner', ...spec });
    await warm?.(uid);
    const writes = await StatusWrites.start(stack, name);
    await writes.quiet(QUIET_MS);
    writes.writes.length = 0;
    await run(uid);
    // The turn has answered; its status writes follow off its path. Wait until the status
    // shows the journal's head, then until nothing moves (the reconciler's pass included).
    const head = (await stack.journal(uid)).length;
    await stack.waitConversation(
      name,
      (obj) => (obj as { status?: { journal?: { head?: number } } }).status?.journal?.head === head,
      30_000,
    );
    await writes.quiet(QUIET_MS);
    writes.stop();
    return writes;
  }

  const tools = {
    mcpServers: [
      {
        name: 'ops',
        transport: 'stdio',
        command: process.execPath,
        args: [
          '--import',
          'tsx',
          join(repoRoot, 'test', 'support', 'mcp-servers', 'failure-server.ts'),
        ],
      },
    ],
  };

  it('a plain turn: one write, by the turn code; the reconciler writes nothing', async () => {
    await stack.withDiagnostics(async () => {
      const writes = await counted('plain', {}, async (uid) => {
        const answer = await postMessage(stack.apiUrl, owner, uid, 'hello', 'k1');
        expect(answer.body).toMatchObject({ status: 'complete' });
      });
      expect(writes.summary()).toEqual(['turn code: Ready']);
      const status = writes.writes[0]!.status;
      expect(status).not.toHaveProperty('currentTurn');
      expect(status).not.toHaveProperty('turns');
      const progressing = (status.conditions as { type: string; reason: string }[]).find(
        (c) => c.type === 'Progressing',
      );
      expect(progressing?.reason).toBe('Idle');
    });
  });

  it('a turn slower than the delay: two writes (Running, then Ready)', async () => {
    await stack.withDiagnostics(async () => {
      const writes = await counted('slow', { tools }, async (uid) => {
        const answer = await postMessage(
          stack.apiUrl,
          owner,
          uid,
          'wait [[tool:ops/slow {"ms":6000}]]',
          'k1',
        );
        expect(answer.body).toMatchObject({ status: 'complete' });
      });
      expect(writes.summary()).toEqual(['turn code: Running', 'turn code: Ready']);
    });
  });

  it('a turn paused for approval, then approved: two writes (AwaitingApproval, then Ready)', async () => {
    await stack.withDiagnostics(async () => {
      const writes = await counted(
        'gated',
        { tools: { builtin: ['calculator'], requireApproval: ['calculator'] } },
        async (uid) => {
          const paused = await postMessage(
            stack.apiUrl,
            owner,
            uid,
            'add [[tool:calculator {"expression":"2+3"}]]',
            'k1',
          );
          expect(paused.body).toMatchObject({ status: 'paused' });
          const requestId = String((paused.body.approval as Record<string, unknown>).requestId);
          await stack.waitConversation(
            'gated',
            (obj) => (obj as { status?: { phase?: string } }).status?.phase === 'AwaitingApproval',
            30_000,
          );
          const approved: ApiAnswer = await apiCall(
            stack.apiUrl,
            'POST',
            `/v1/conversations/${uid}/approvals/${requestId}`,
            { token: admin, body: { decision: 'approve' } },
          );
          expect(approved.status).toBe(200);
          expect(approved.body).toMatchObject({ status: 'complete' });
        },
      );
      expect(writes.summary()).toEqual(['turn code: AwaitingApproval', 'turn code: Ready']);
      const paused = writes.writes[0]!.status;
      expect(paused.turns).toMatchObject({ current: { state: 'awaiting_approval' } });
    });
  });

  it('a quarantined turn: one write, Degraded TurnAmbiguous with the quarantine record', async () => {
    await stack.withDiagnostics(async () => {
      const writes = await counted(
        'quarantined',
        { tools },
        async (uid) => {
          const answer = await postMessage(stack.apiUrl, owner, uid, 'go [[tool:ops/crash]]', 'k2');
          expect(answer.body).toMatchObject({ status: 'ambiguous' });
        },
        // The MCP server starts on the first call, which can take seconds on a loaded
        // machine; a turn before the counted one starts it, so the quarantine is quick.
        async (uid) => {
          const warm = await postMessage(
            stack.apiUrl,
            owner,
            uid,
            'say [[tool:ops/echo {"text":"hi"}]]',
            'k1',
          );
          expect(warm.body).toMatchObject({ status: 'complete' });
        },
      );
      expect(writes.summary()).toEqual(['turn code: Degraded']);
      const status = writes.writes[0]!.status;
      expect(status.turns).toMatchObject({ quarantined: { reason: expect.any(String) } });
      const degraded = (status.conditions as { type: string; reason: string }[]).find(
        (c) => c.type === 'Degraded',
      );
      expect(degraded?.reason).toBe('TurnAmbiguous');
    });
  });
});
