import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

import { PersonaPaymentPolicies } from '../operator/turns/persona-payment-policy';
import { startApi, TOKENS, type TestApi } from '../test/support/api-fixtures';
import { startTestRecords, type TestRecords } from '../test/support/records-server';
import { EXAMPLE_SPEND_LIMITS } from '../test/support/spend-limits';
import { ExitCode } from './cli-support';
import { formatPersonaPolicy } from './persona-policy-command';
import { runCaptured } from './testdata/captured-run';

/*
 * `polychrome personas payment-policy set | clear | get`: the CLI's own code against the
 * real public API on 127.0.0.1:0 and the state plane's real Records service over mutual
 * TLS (the same command runs over the Kubernetes door as `kubectl polychrome personas
 * payment-policy ...`: test/integration/kube-persona-policies.test.ts).
 */

const ROOT = 'email:root@example.com';

let dir: string;
let records: TestRecords;
let api: TestApi;
let admin: Record<string, string>;
let serial = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-persona-policy-'));
  await writeFile(join(dir, 'limits.json'), JSON.stringify(EXAMPLE_SPEND_LIMITS));
  const bad = { ...EXAMPLE_SPEND_LIMITS, periodSeconds: 0 };
  await writeFile(join(dir, 'zero-period.json'), JSON.stringify(bad));
  records = await startTestRecords();
  api = await startApi({ personaPolicies: new PersonaPaymentPolicies(records.records) });
  admin = { POLYCHROME_API_URL: api.base, POLYCHROME_TOKEN: TOKENS.admin };
}, 60_000);
afterAll(async () => {
  await api?.close();
  await records?.close();
  await rm(dir, { recursive: true, force: true });
});

async function persona(): Promise<string> {
  serial += 1;
  return records.persona(`email:cli-${String(serial)}@example.com`);
}

const history = async (personaId: string) =>
  (await records.records.getPersonaPaymentPolicy(personaId)).history;

const policy = (action: string, personaId: string, ...flags: string[]) => [
  'personas',
  'payment-policy',
  action,
  personaId,
  ...flags,
];

describe('polychrome personas payment-policy', () => {
  it('sets a wallet and limits from a file, shows them with their history, then limits alone, then clears', async () => {
    const id = await persona();
    const limits = join(dir, 'limits.json');
    const set = await runCaptured(
      policy(
        'set',
        id,
        '--wallet',
        'research',
        '--limits',
        limits,
        '--reason',
        'OPS-140',
        '--actor',
        ROOT,
      ),
      admin,
    );
    expect(set).toMatchObject({ code: ExitCode.Ok, stderr: '' });
    expect(set.stdout).toContain(
      `persona ${id}: wallet research, for its turns in conversations that link none`,
    );
    expect(set.stdout).toMatch(new RegExp(`set by ${ROOT} at \\S+Z \\(change 1\\): OPS-140`, 'u'));
    const limitsOnly = await runCaptured(
      policy('set', id, '--limits', limits, '--reason', 'no wallet now', '--actor', ROOT),
      admin,
    );
    expect(limitsOnly.stdout).toContain(
      `persona ${id}: no wallet; its limits hold every payment of its turns`,
    );
    const shown = await runCaptured(policy('get', id, '--actor', ROOT, '--json'), admin);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      personaId: id,
      wallet: '',
      limits: EXAMPLE_SPEND_LIMITS,
      sequence: 2,
      history: [
        { sequence: 1, wallet: 'research', setBy: ROOT, reason: 'OPS-140' },
        { sequence: 2, wallet: '', setBy: ROOT, reason: 'no wallet now' },
      ],
    });
    const cleared = await runCaptured(
      policy('clear', id, '--reason', 'contract ended', '--actor', ROOT),
      admin,
    );
    expect(cleared.code).toBe(ExitCode.Ok);
    expect(cleared.stdout).toContain(`persona ${id}: no payment policy`);
    const text = await runCaptured(policy('get', id, '--actor', ROOT), admin);
    expect(text.stdout).toContain('  changes, oldest first:');
    expect(text.stdout).toMatch(
      / {4}3\. \S+Z by email:root@example\.com: no wallet, no limits; contract ended/u,
    );
    expect((await history(id)).map((c) => c.reason)).toEqual([
      'OPS-140',
      'no wallet now',
      'contract ended',
    ]);
  });

  it("prints the control plane's refusal: a member may not, bad limits name the field; nothing recorded", async () => {
    const id = await persona();
    const args = (file: string, actor: string) =>
      policy('set', id, '--limits', join(dir, file), '--reason', 'r', '--actor', actor);
    const member = await runCaptured(args('limits.json', 'email:alice@example.com'), {
      ...admin,
      POLYCHROME_TOKEN: TOKENS.alice,
    });
    expect(member.code).toBe(ExitCode.Error);
    expect(member.stderr).toContain('only an admin of the public API may');
    const zero = await runCaptured(args('zero-period.json', ROOT), admin);
    expect(zero.code).toBe(ExitCode.Error);
    expect(zero.stderr).toContain('periodSeconds is required');
    const impostor = await runCaptured(args('limits.json', 'email:alice@example.com'), admin);
    expect(impostor.stderr).toContain('is not one of your identities');
    expect(await history(id)).toEqual([]);
  });

  it.each([
    [['set', 'P', '--limits', 'LIMITS', '--actor', ROOT], 'needs --reason TEXT'],
    [['set', 'P', '--wallet', 'w', '--reason', 'r', '--actor', ROOT], 'needs --limits FILE'],
    [['set', 'P', '--limits', 'NOFILE', '--reason', 'r', '--actor', ROOT], '--limits '],
    [
      ['clear', 'P', '--limits', 'LIMITS', '--reason', 'r', '--actor', ROOT],
      'takes no --wallet or --limits',
    ],
    [['get', 'P', '--reason', 'r', '--actor', ROOT], 'takes no --wallet, --limits or --reason'],
    [['get', 'P'], '--actor is required'],
    [['get', '--actor', ROOT], 'needs a persona id'],
    [['get', 'bot:support-desk', '--actor', ROOT], 'is an identity, not a persona id'],
    [['get', 'P', 'Q', '--actor', ROOT], 'takes one persona id, got extra Q'],
    [['show', 'P', '--actor', ROOT], 'takes set, clear or get'],
  ])('refuses %j before reaching the API (exit 2)', async (words, message) => {
    const served = api.logs.filter((l) => l.msg === 'request served').length;
    const args = words.map((w) =>
      w === 'LIMITS' ? join(dir, 'limits.json') : w === 'NOFILE' ? join(dir, 'none.json') : w,
    );
    const run = await runCaptured(['personas', 'payment-policy', ...args], admin);
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stderr).toContain(message);
    expect(api.logs.filter((l) => l.msg === 'request served')).toHaveLength(served);
  });

  it('says where roles are set: polychrome personas takes payment-policy only', async () => {
    const run = await runCaptured(['personas', 'set-roles', '--persona', 'bot:x'], admin);
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stderr).toContain('kubectl polychrome personas set-roles');
  });
});

describe('formatPersonaPolicy', () => {
  it('prints a persona without a policy in one line', () => {
    expect(formatPersonaPolicy({ personaId: 'p', wallet: '', sequence: 0, history: [] })).toBe(
      'persona p: no payment policy\n',
    );
  });
});
