import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, afterAll, describe, expect, it } from '@jest/globals';

import { TOKENS } from '../test/support/api-fixtures';
import { committedEvents, startApiStack, type ApiStack } from '../test/support/api-stack';
import { ExitCode } from './cli-support';
import { runCaptured } from './testdata/captured-run';
import { EXAMPLE_SPEND_LIMITS } from '../test/support/spend-limits';

/*
 * `polychrome payments link | unlink | policy`: the CLI's own code against the real public
 * API on 127.0.0.1:0 and the real coordinator and journal store (the same command runs over
 * the Kubernetes door as `kubectl polychrome payments ...`, a PUT sent as its POST).
 */

const ROOT = 'email:root@example.com';

let stack: ApiStack | undefined;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-payments-'));
  await writeFile(join(dir, 'limits.json'), JSON.stringify(EXAMPLE_SPEND_LIMITS));
  const [asset] = EXAMPLE_SPEND_LIMITS.assets;
  const bad = { ...EXAMPLE_SPEND_LIMITS, assets: [{ ...asset, maxPerPayment: '0.5' }] };
  await writeFile(join(dir, 'fractional.json'), JSON.stringify(bad));
  await writeFile(join(dir, 'broken.json'), '{"networks": [');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await stack?.api.close();
  stack = undefined;
});

async function started(): Promise<{ s: ApiStack; admin: Record<string, string> }> {
  const s = (stack = await startApiStack());
  return { s, admin: { ...s.env, POLYCHROME_TOKEN: TOKENS.admin } };
}

const policies = async (s: ApiStack) =>
  (await committedEvents(s.api, s.conversationId)).filter((e) => e.kind === 'payment_policy');

describe('polychrome payments', () => {
  it('links a wallet from a limits file, shows it, and unlinks it, each recorded', async () => {
    const { s, admin } = await started();
    const id = s.conversationId;
    const link = await runCaptured(
      [
        'payments',
        'link',
        id,
        '--wallet',
        'support-desk',
        '--limits',
        join(dir, 'limits.json'),
        '--reason',
        'paid search',
        '--actor',
        ROOT,
      ],
      admin,
    );
    expect(link).toMatchObject({ code: ExitCode.Ok, stderr: '' });
    expect(link.stdout).toContain(`conversation ${id}: wallet support-desk`);
    expect(link.stdout).toContain(`set by ${ROOT}`);
    const shown = await runCaptured(['payments', 'policy', id, '--actor', ROOT, '--json'], admin);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      wallet: 'support-desk',
      limits: EXAMPLE_SPEND_LIMITS,
      setBy: ROOT,
    });
    const unlink = await runCaptured(
      ['payments', 'unlink', id, '--reason', 'contract ended', '--actor', ROOT],
      admin,
    );
    expect(unlink.code).toBe(ExitCode.Ok);
    expect(unlink.stdout).toContain('no wallet linked; payments are off');
    // proto3 JSON leaves out the empty wallet of the unlink.
    expect(
      (await policies(s)).map((e) => ({ wallet: '', ...(e.payload as object) })),
    ).toMatchObject([
      { wallet: 'support-desk', actor: ROOT, reason: 'paid search' },
      { wallet: '', actor: ROOT, reason: 'contract ended' },
    ]);
  });

  it("prints the control plane's refusal: the owner may not link, a fractional cap is named", async () => {
    const { s, admin } = await started();
    const id = s.conversationId;
    const args = (file: string) => [
      'payments',
      'link',
      id,
      '--wallet',
      'w',
      '--limits',
      join(dir, file),
      '--reason',
      'r',
    ];
    const owner = await runCaptured(
      [...args('limits.json'), '--actor', 'email:alice@example.com'],
      s.env,
    );
    expect(owner.code).toBe(ExitCode.Error);
    expect(owner.stderr).toContain('only an admin may');
    const fractional = await runCaptured([...args('fractional.json'), '--actor', ROOT], admin);
    expect(fractional.code).toBe(ExitCode.Error);
    expect(fractional.stderr).toContain('limits.assets[0].maxPerPayment');
    expect(await policies(s)).toEqual([]);
  });

  it.each([
    [['link', '--wallet', 'w', '--reason', 'r'], 'needs --wallet W'],
    [['link', '--wallet', 'w', '--limits', 'LIMITS/broken.json', '--reason', 'r'], 'is not JSON'],
    [['link', '--wallet', 'w', '--limits', 'LIMITS/limits.json'], 'needs --reason TEXT'],
    [['unlink', '--wallet', 'w', '--reason', 'r'], 'takes no --wallet or --limits'],
    [['pay', '--reason', 'r'], 'or link, unlink or policy then the conversation'],
  ])('refuses %j before reaching the API (exit 2)', async (words, message) => {
    const { s, admin } = await started();
    const [action, ...flags] = words.map((w) => w.replace('LIMITS', dir));
    const run = await runCaptured(
      ['payments', action ?? '', s.conversationId, ...flags, '--actor', ROOT],
      admin,
    );
    expect(run.code).toBe(ExitCode.Usage);
    expect(run.stderr).toContain(message);
    expect(s.api.logs.filter((l) => l.msg === 'request served')).toEqual([]);
  });
  it("lists a conversation's payments from its export, audited here; the owner is refused", async () => {
    const { s, admin } = await started();
    const id = s.conversationId;
    await runCaptured(
      [
        'payments',
        'link',
        id,
        '--wallet',
        'ops',
        '--limits',
        join(dir, 'limits.json'),
        '--reason',
        'r',
        '--actor',
        ROOT,
      ],
      admin,
    );
    const pin = ['--public-key', Buffer.from(s.api.turns.journal.publicKey).toString('hex')];
    const listed = await runCaptured(['payments', id, '--actor', ROOT, ...pin], admin);
    expect(listed).toMatchObject({ code: ExitCode.Ok, stderr: '' });
    expect(listed.stdout).toContain(`conversation ${id}: OK: 0 charges, 0 problems`);
    const json = await runCaptured(['payments', id, '--actor', ROOT, '--json', ...pin], admin);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: true, payments: [], findings: [] });
    const owner = await runCaptured(['payments', id, ...pin], {
      ...s.env,
      POLYCHROME_TOKEN: TOKENS.alice,
    });
    expect(owner.code).not.toBe(ExitCode.Ok);
    expect(owner.stdout).toBe('');
    const usage = await runCaptured(['payments', id, '--reason', 'x', '--actor', ROOT], admin);
    expect(usage).toMatchObject({ code: ExitCode.Usage });
    expect(usage.stderr).toContain(
      'payments NAME lists payments: it takes no --wallet, --limits or --reason',
    );
  });
});
