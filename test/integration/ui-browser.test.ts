/**
 * The forensics UI in a real headless Chromium (Debian's `chromium`, driven by
 * puppeteer-core), through the real chain: the browser talks only to the real
 * `kubectl polychrome dashboard` proxy (cli/dashboard.ts) on 127.0.0.1, which forwards
 * with dave's kubeconfig (cli/kube-connection.ts) to the shared cluster's real
 * kube-apiserver, which checks RBAC and proxies to the door (support/kube-door.ts) serving
 * the bundle that hack/build-ui.ts built. The verification the test checks is the UI's own
 * code running in the browser.
 *
 * POLYCHROME_UI_SCREENSHOTS=1 writes the screenshots to docs/ui/ (otherwise to a
 * temporary folder).
 */
import { request as httpRequest } from 'node:http';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { decodePayload } from '../../common/event-kinds';
import {
  AuthorizationV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
} from '@kubernetes/client-node';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

import { buildUi } from '../../hack/build-ui';
import { repoRoot } from '../../hack/lib/paths';
import { pollUntil } from '../../hack/lib/processes';
import { validMinimalConversationSpec } from '../../operator/api/v1alpha1/conversation-cases';
import { UiAssets } from '../../operator/ui/ui-assets';
import { startDashboard, type Dashboard } from '../../cli/dashboard';
import { DASHBOARD_COOKIE } from '../../cli/dashboard-policy';
import { loadKubeConnection } from '../../cli/kube-connection';
import {
  askReply,
  calculatorReply,
  memoryReply,
  textReply,
  transferReply,
  unknownFirstTransfer,
} from '../support/real-turns';
import { type ScriptReply } from '../../harness/model/scripted-provider';
import pino from 'pino';
import { startCrewModels, type CrewModels } from '../support/agent-turns';
import { TEST_NOW_MS } from '../support/api-fixtures';
import { readyStatus } from '../support/in-memory-conversations';
import { startScriptedHarness, type ScriptedHarness } from '../support/scripted-harness';
import { panelCrew, panelResponder } from '../support/crew-replies';
import { conversations, createConversationObject, kubeConfig, sharedCluster } from './support/kube';
import { kubectl, kubeJson, startKubeDoorStack, type KubeDoorStack } from './support/kube-door';

const CHROMIUM = process.env.POLYCHROME_CHROMIUM ?? '/usr/bin/chromium';
const doorPath = '/apis/api.polychrome.dev/v1alpha1';

let stack: KubeDoorStack;
let adminConfig: KubeConfig;
let dave: string;
let vera: string;
let conversationId: string;
let browser: Browser;
let asDave: Dashboard;
let asVera: Dashboard;
let shots: string;
let bundleDir: string | undefined;
/** The panel's models (a lead and two delegates) on the local Messages API. */
let crew: CrewModels;
/** The panel conversation's own harness (a harness serves one conversation). */
let panelHarness: ScriptedHarness | undefined;

/** The side-effecting `transfer` tool: its first call breaks mid-call. */
const transfer = unknownFirstTransfer([{ content: 'sent 42 to Bob', isError: false }]);
const handoffReply: ScriptReply = {
  content: [
    { tool_use: { name: '__handoff_to', input: { agent: 'billing', reason: 'invoices' } } },
  ],
};

async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${join(shots, name)}.png`, fullPage: true });
}

/**
 * POSTs `body` to the `sub` of Conversation `name` (hello) as `who` (dave), through
 * kube-apiserver and the door.
 */
async function create(
  sub: string,
  body: unknown,
  who = dave,
  name = 'hello',
): Promise<Record<string, unknown>> {
  const got = await kubeJson(
    who,
    'POST',
    `${doorPath}/namespaces/${stack.namespace}/conversations/${name}/${sub}`,
    body,
  );
  expect([got.status, got.message]).toEqual([200, '']);
  return got.json as Record<string, unknown>;
}

/** Posts a message as `who` (dave); resolves with the reply. */
async function post(text: string, key: string, who = dave): Promise<Record<string, unknown>> {
  return await create('messages', { text, idempotencyKey: key }, who);
}

/** Writes the Conversation's status as the reconciler does: Ready, and the coordinator's journal checkpoint. */
async function publishStatus(journal?: Record<string, unknown>): Promise<void> {
  const inMemory = stack.api.turns.conversations.byName(stack.namespace, 'hello');
  const { api, group, version, plural } = conversations(adminConfig);
  await api.patchNamespacedCustomObjectStatus({
    group,
    version,
    plural,
    namespace: stack.namespace,
    name: 'hello',
    body: [
      {
        op: 'add',
        path: '/status',
        value: {
          phase: 'Ready',
          observedGeneration: 1,
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              observedGeneration: 1,
              lastTransitionTime: '2026-12-01T12:00:00Z',
              reason: 'SandboxReady',
              message: 'the harness pod is running',
            },
          ],
          journal: journal ?? inMemory?.status?.journal,
        },
      },
    ],
  });
}

/** Waits until the coordinator's status names the journal's head (its checkpoint is current). */
async function settledJournal(): Promise<Record<string, unknown>> {
  return await pollUntil(
    'the coordinator to write status.journal at the head',
    async () => {
      await Promise.resolve();
      const journal = stack.api.turns.conversations.byName(stack.namespace, 'hello')?.status
        ?.journal as Record<string, unknown> | undefined;
      return journal !== undefined && journal.head === stack.api.head(conversationId)
        ? journal
        : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  );
}

/** A plain request to the proxy, as another program on this machine could send it. */
async function raw(
  url: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: string }> {
  const target = new URL(url);
  return await new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method: options.method ?? 'GET',
        headers: options.headers ?? {},
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.once('error', reject);
    req.end();
  });
}

async function openConversation(dashboard: Dashboard): Promise<Page> {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(dashboard.url, { waitUntil: 'load' });
  await page.waitForSelector('tr[data-conversation="hello"]', { timeout: 30_000 });
  return page;
}

/** The text of each element matching `selector` (evaluated in the page, which has the DOM). */
async function texts(page: Page, selector: string): Promise<string[]> {
  return (await page.evaluate(
    `[...document.querySelectorAll(${JSON.stringify(selector)})].map((e) => e.textContent ?? '')`,
  )) as string[];
}

/** Waits until the timeline's header of turn `turnId` says `label` (where the turn stands). */
async function standing(page: Page, turnId: unknown, label: string): Promise<void> {
  const header = JSON.stringify(`turn ${String(turnId)} — ${label}`);
  await page.waitForFunction(
    `[...document.querySelectorAll('tr.turn')].some((e) => e.textContent === ${header})`,
    { timeout: 30_000 },
  );
}

/** The attribute `name` of each element matching `selector`. */
async function attrs(page: Page, selector: string, name: string): Promise<(string | null)[]> {
  return (await page.evaluate(
    `[...document.querySelectorAll(${JSON.stringify(selector)})].map((e) => e.getAttribute(${JSON.stringify(name)}))`,
  )) as (string | null)[];
}

async function verifyInPage(
  page: Page,
): Promise<{ ok: string; position: string; reason: string; text: string }> {
  await page.evaluate("document.getElementById('verify-result')?.remove()");
  await page.click('#verify-button');
  await page.waitForSelector('#verify-result, #verify-forbidden, p.error', { timeout: 60_000 });
  const attr = async (name: string): Promise<string> =>
    (await attrs(page, '#verify-result', name))[0] ?? '';
  return {
    ok: await attr('data-ok'),
    position: await attr('data-position'),
    reason: await attr('data-reason'),
    text: (await texts(page, '#verify-result'))[0] ?? '',
  };
}

beforeAll(async () => {
  shots =
    process.env.POLYCHROME_UI_SCREENSHOTS === '1'
      ? join(repoRoot, 'docs', 'ui')
      : join(repoRoot, '.local', 'ui-screenshots');
  await mkdir(shots, { recursive: true });
  // The bundle as npm run build makes it, served by the door from memory.
  bundleDir = await mkdtemp(join(tmpdir(), 'ui-bundle-'));
  await buildUi(bundleDir);
  crew = await startCrewModels({ agents: panelCrew(), respond: panelResponder() });
  stack = await startKubeDoorStack(
    'ui',
    {
      replies: [
        calculatorReply('6*7'),
        textReply('It is 42.'),
        textReply('Yes: the browser recomputes every root.'),
        textReply('This one arrived while you watched.'),
        // Where a turn stands: quarantined, then resolved; a handoff; a question.
        transferReply,
        textReply('Sent 42 to Bob.'),
        handoffReply,
        askReply('For how many?'),
        // Memory: the question answered, then a turn that keeps a fact.
        textReply('Booked for two.'),
        memoryReply({ action: 'set', key: 'city', value: 'Lisbon' }),
        textReply('Noted.'),
      ],
      extraTools: transfer.extraTools,
      // The panel conversation's Agents, each model called by the control plane's relay.
      coordinator: crew.coordinator,
      // The calculator behind an approval, as the test spec has it; `transfer`; a handoff target.
      spec: {
        agent: { systemPrompt: 'You are a test agent.', handoffTargets: ['billing'] },
        tools: { builtin: ['calculator', 'transfer', 'memory'], requireApproval: ['calculator'] },
      },
    },
    { ui: await UiAssets.load(bundleDir) },
  );
  adminConfig = await kubeConfig();
  const ns = stack.namespace;
  conversationId = stack.addConversation('hello', 'kubernetes:dave');
  await createConversationObject(adminConfig, ns, 'hello', {
    ...validMinimalConversationSpec,
    owner: 'kubernetes:dave',
  });
  // dave administers the namespace (the stack binds him to admin, which aggregates
  // polychrome-conversation-admin); vera may only read (a RoleBinding to
  // polychrome-conversation-reader: the UI, the Conversations, transcripts and logs, not
  // the export; `view` alone would show her no content).
  dave = stack.users.dave;
  vera = await (await sharedCluster()).mintUser('vera', ['team-a']);
  await adminConfig.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: ns,
    body: {
      metadata: { name: 'vera-reader' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'polychrome-conversation-reader',
      },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'vera' }],
    },
  });
  const authorization = adminConfig.makeApiClient(AuthorizationV1Api);
  for (const [user, resource, subresource, group] of [
    ['vera', 'ui', '', 'api.polychrome.dev'],
    ['vera', 'conversations', '', 'polychrome.dev'],
    ['dave', 'conversations', 'export', 'api.polychrome.dev'],
  ] as const) {
    await pollUntil(
      `${user} may get ${resource}${subresource === '' ? '' : `/${subresource}`} (the aggregated roles)`,
      async () => {
        const review = await authorization.createSubjectAccessReview({
          body: {
            spec: {
              user,
              groups: ['team-a', 'system:authenticated'],
              resourceAttributes: { group, resource, subresource, verb: 'get', namespace: ns },
            },
          },
        });
        return review.status?.allowed === true ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  }
  // The first turn, alice's, calls the calculator, which the test spec puts behind an
  // approval: dave (admin) approves it on the door (nobody approves their own call).
  const paused = (await post('What is 6*7?', 'k1', stack.users.alice)) as {
    approval?: { requestId?: string };
  };
  const requestId = paused.approval?.requestId ?? '';
  expect(requestId).not.toBe('');
  await create(`approvals/${requestId}`, { decision: 'approve', comment: 'fine by dave' });
  await post('Can I check it myself?', 'k2');
  await publishStatus(await settledJournal());

  asDave = await startDashboard({
    connection: await loadKubeConnection({ kubeconfig: dave, namespace: ns }),
  });
  asVera = await startDashboard({
    connection: await loadKubeConnection({ kubeconfig: vera, namespace: ns }),
  });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await asDave?.close();
  await asVera?.close();
  await stack?.close();
  await panelHarness?.close();
  await crew?.api.close();
  if (bundleDir !== undefined) await rm(bundleDir, { recursive: true, force: true });
});

describe('the forensics UI in Chromium', () => {
  it('lists the namespace conversations with their conditions, then shows a conversation turns', async () => {
    const page = await openConversation(asDave);
    // The secret left the URL: the first visit exchanged it for the cookie.
    expect(page.url()).toBe(
      `${asDave.url.split('/?')[0]}${doorPath}/namespaces/${stack.namespace}/ui/index.html`,
    );
    const cookies = await browser.cookies();
    expect(cookies.find((c) => c.name === DASHBOARD_COOKIE)).toMatchObject({
      httpOnly: true,
      sameSite: 'Strict',
    });
    expect(await page.evaluate('document.cookie')).toBe('');
    const row = (await texts(page, 'tr[data-conversation="hello"]'))[0];
    expect(row).toContain('Ready=True (SandboxReady)');
    expect(row).toContain('kubernetes:dave');
    await screenshot(page, 'list');

    await page.click('tr[data-conversation="hello"] a');
    await page.waitForFunction(
      `document.querySelectorAll('tr[data-kind="turn_complete"]').length === 2`,
      { timeout: 30_000 },
    );
    const said = await texts(page, 'tr[data-kind="message_received"]');
    expect(said[0]).toContain('kubernetes:alice');
    expect(said[0]).toContain('said: What is 6*7?');
    // The approval: what was asked, with the exact arguments, and who answered how.
    const asked = (await texts(page, 'tr[data-kind="approval_request"]'))[0];
    expect(asked).toContain('asks approval to run calculator with exactly {"expression":"6*7"}');
    const answered = (await texts(page, 'tr[data-kind="approval_response"]'))[0];
    expect(answered).toContain('kubernetes:dave');
    expect(answered).toMatch(/answered \S*APPROVE\S* to calculator, request \S+: fine by dave/u);
    const result = (await texts(page, 'tr[data-kind="tool_result"]'))[0];
    expect(result).toContain('result: 42');
    const replied = await texts(page, 'tr[data-kind="turn_complete"]');
    expect(replied[1]).toContain('replied: Yes: the browser recomputes every root.');
    expect(await texts(page, 'tr.turn')).toEqual(
      expect.arrayContaining([expect.stringMatching(/^turn .+ — complete$/u)]),
    );
    await page.close();
  });

  it('updates live while a turn runs, without reloading', async () => {
    const page = await openConversation(asDave);
    await page.click('tr[data-conversation="hello"] a');
    await page.waitForFunction(
      `document.querySelectorAll('tr[data-kind="turn_complete"]').length === 2`,
      { timeout: 30_000 },
    );
    await page.evaluate('window.marker = 42');
    await post('Are you there?', 'k3');
    await page.waitForFunction(
      `document.querySelectorAll('tr[data-kind="turn_complete"]').length === 3`,
      { timeout: 30_000 },
    );
    expect(await page.evaluate('window.marker')).toBe(42);
    const last = await texts(page, 'tr[data-kind="turn_complete"]');
    expect(last[2]).toContain('This one arrived while you watched.');
    expect((await texts(page, '#stream-state'))[0]).toContain('following the log stream');
    await publishStatus(await settledJournal());
    await page.close();
  });

  it('says where each turn stands: quarantined, resolved, then complete; handed off; waiting for an answer', async () => {
    const page = await openConversation(asDave);
    await page.click('tr[data-conversation="hello"] a');
    await page.waitForFunction(
      `document.querySelectorAll('tr[data-kind="turn_complete"]').length === 3`,
      { timeout: 30_000 },
    );
    // `transfer` breaks mid-call: the outcome is unknown, so the turn is quarantined.
    const paid = await post('Pay Bob 42.', 's1');
    expect(paid.status).toBe('ambiguous');
    await standing(page, paid.turnId, 'quarantined');
    await create('resolve', {
      actor: 'kubernetes:dave',
      decision: 'did_not_run',
      turnId: paid.turnId,
    });
    await standing(page, paid.turnId, 'quarantine resolved, to run again');
    // The next message runs the resolved turn first: the call runs again, the turn completes.
    const handedOff = await post('Who handles invoices?', 's2');
    expect(handedOff.status).toBe('handoff');
    expect(transfer.calls).toHaveLength(2);
    await standing(page, paid.turnId, 'complete, after a resolved quarantine');
    await standing(page, handedOff.turnId, 'handed off to billing');
    const asked = await post('Book a table.', 's3');
    expect(asked.status).toBe('paused');
    await standing(page, asked.turnId, 'waiting for an answer');
    const headers = await texts(page, 'tr.turn');
    expect(headers.slice(0, 3)).toEqual([
      expect.stringMatching(/ — complete$/u),
      expect.stringMatching(/ — complete$/u),
      expect.stringMatching(/ — complete$/u),
    ]);
    expect(headers.slice(3)).toEqual([
      `turn ${String(paid.turnId)} — complete, after a resolved quarantine`,
      `turn ${String(handedOff.turnId)} — handed off to billing`,
      `turn ${String(asked.turnId)} — waiting for an answer`,
    ]);
    await publishStatus(await settledJournal());
    await page.close();
  });

  it('verifies every event in the browser, against the pinned key, and checks an inclusion proof', async () => {
    const page = await openConversation(asDave);
    await page.click('tr[data-conversation="hello"] a');
    await page.waitForSelector('#verify-button');
    // Not pinned: it verifies, and says the header's key is not pinned.
    const unpinned = await verifyInPage(page);
    expect(unpinned.ok).toBe('true');
    expect(unpinned.text).toContain('NOT pinned');
    const keyIds = await texts(page, 'li[data-key-id]');
    expect(keyIds[0]).toMatch(/fingerprint ([0-9a-f]{4} ){15}[0-9a-f]{4}$/u);

    await page.type(
      '#pin-input',
      Buffer.from(stack.api.turns.journal.publicKey).toString('base64'),
    );
    await page.click('#pin');
    const pinned = await verifyInPage(page);
    expect(pinned.ok).toBe('true');
    expect(pinned.text).toContain('against the pinned key');
    const positions = (await attrs(page, 'tr[data-position]', 'data-position')).map(Number);
    const sealList = await attrs(page, 'tr[data-position]', 'data-seal');
    const seals = positions.map((p, i) => [p, sealList[i]] as const);
    const head = stack.api.head(conversationId);
    expect(seals).toHaveLength(head);
    // Every event up to the last signed root is verified; that root itself is the head's last entry.
    expect(seals.filter(([, seal]) => seal !== 'sealed').map(([p]) => p)).toEqual([head - 1]);
    // The rows now come from the export's bytes, decoded in the browser.
    const roots = await texts(page, 'tr[data-kind="signed_root"]');
    expect(roots.length).toBeGreaterThan(2);
    for (const root of roots)
      expect(root).toMatch(/signed root over [1-9][0-9]* events, key [0-9a-f]{32}/u);
    expect((await texts(page, 'tr[data-kind="turn_complete"]'))[0]).toContain('replied: It is 42.');
    await page.click('button[data-proof="3"]');
    await page.waitForSelector('[data-proof-result="3"]');
    expect((await texts(page, '[data-proof-result="3"]'))[0]).toMatch(
      /^proof ok: event 3 is leaf 3 of the \d+ signed at position \d+/u,
    );
    await screenshot(page, 'verified');

    // Another key pinned: only the pinned key is accepted.
    await page.evaluate(`localStorage.setItem('polychrome.pinnedPublicKey', '${'A'.repeat(43)}=')`);
    const wrong = await verifyInPage(page);
    expect([wrong.ok, wrong.reason]).toEqual(['false', 'wrong_key']);
    await page.evaluate("localStorage.removeItem('polychrome.pinnedPublicKey')");
    await page.close();
  });

  it('fails a tampered export at the first signed root over the changed byte, and a rolled-back one', async () => {
    const page = await openConversation(asDave);
    await page.click('tr[data-conversation="hello"] a');
    await page.waitForSelector('#verify-button');
    // The real export through the real chain, one byte of one payload changed on the way
    // to the browser: only the file's bytes are doubled, the verifier is the page's own.
    const real = await raw(
      `http://${asDave.policy.host}${doorPath}/namespaces/${stack.namespace}/conversations/hello/export`,
      {
        headers: {
          host: asDave.policy.host,
          cookie: `${DASHBOARD_COOKIE}=${asDave.policy.secret}`,
        },
      },
    );
    expect(real.status).toBe(200);
    const lines = real.body.split('\n');
    const victim = lines.findIndex(
      (l) => l.includes('"kind":"message_received"') && lines.indexOf(l) > 3,
    );
    const event = JSON.parse(lines[victim]!) as { position: number; payload: string };
    const bytes = Buffer.from(event.payload, 'base64');
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 0x01;
    lines[victim] = JSON.stringify({ ...event, payload: bytes.toString('base64') });
    const coveringRoot = lines
      .slice(victim + 1)
      .map((l) => (l === '' ? undefined : (JSON.parse(l) as { position: number; kind: string })))
      .find((e) => e?.kind === 'signed_root')!;
    await page.setRequestInterception(true);
    page.on('request', (request) => {
      if (request.url().endsWith('/export')) {
        void request.respond({
          status: 200,
          contentType: 'application/x-ndjson',
          body: lines.join('\n'),
        });
      } else void request.continue();
    });
    const tampered = await verifyInPage(page);
    expect(tampered).toMatchObject({
      ok: 'false',
      reason: 'event_changed',
      position: String(coveringRoot.position),
    });
    expect(
      (await attrs(page, `tr[data-position="${String(coveringRoot.position)}"]`, 'data-seal'))[0],
    ).toBe('failed');
    await screenshot(page, 'tampered');
    await page.close();

    // The status checkpoint says the journal is longer than the export: rolled back.
    const journal = await settledJournal();
    await publishStatus({ ...journal, head: Number(journal.head) + 3 });
    const again = await openConversation(asDave);
    await again.click('tr[data-conversation="hello"] a');
    await again.waitForSelector('#verify-button');
    expect(await verifyInPage(again)).toMatchObject({ ok: 'false', reason: 'rolled_back' });
    await publishStatus(journal);
    await again.close();
  });

  it('is RBAC on resource ui, verb get: a user without a role gets Forbidden from kube-apiserver', async () => {
    // bob has no role in the namespace.
    const mallory = stack.users.bob;
    const path = `${doorPath}/namespaces/${stack.namespace}/ui/index.html`;
    const refused = await kubectl(mallory, ['get', '--raw', path]);
    expect(refused.ok).toBe(false);
    expect(refused.stderr).toContain('cannot get resource "ui" in API group "api.polychrome.dev"');
    const allowed = await kubectl(vera, ['get', '--raw', path]);
    expect(allowed.stdout).toContain('<script src="app.js"');
  });

  it('tells a reader the export needs conversations/export, naming the verb', async () => {
    const page = await openConversation(asVera);
    await page.click('tr[data-conversation="hello"] a');
    await page.waitForSelector('#verify-button');
    await page.click('#verify-button');
    await page.waitForSelector('#verify-forbidden', { timeout: 30_000 });
    const text = (await texts(page, '#verify-forbidden'))[0];
    expect(text).toContain('"get" on "conversations/export"');
    expect(text).toContain('vera');
    await page.close();
  });

  it('refuses a request without the secret, with a wrong Host, from a foreign Origin, and any write', async () => {
    const head = stack.api.head(conversationId);
    const base = `http://${asDave.policy.host}`;
    const host = asDave.policy.host;
    const cookie = `${DASHBOARD_COOKIE}=${asDave.policy.secret}`;
    const transcript = `${base}${doorPath}/namespaces/${stack.namespace}/conversations/hello/transcript`;
    expect((await raw(transcript, { headers: { host, cookie } })).status).toBe(200);
    expect((await raw(transcript, { headers: { host } })).status).toBe(401);
    expect(
      (await raw(transcript, { headers: { host, cookie: `${DASHBOARD_COOKIE}=guess` } })).status,
    ).toBe(401);
    expect(
      (await raw(transcript, { headers: { host: 'rebound.example:80', cookie } })).status,
    ).toBe(421);
    expect(
      (await raw(transcript, { headers: { host, cookie, origin: 'http://evil.example' } })).status,
    ).toBe(403);
    const messages = transcript.replace(/transcript$/u, 'messages');
    expect((await raw(messages, { method: 'POST', headers: { host, cookie } })).status).toBe(405);
    expect((await raw(messages, { headers: { host, cookie } })).status).toBe(403);
    // Another page in the browser cannot read through it either: its fetch is cross-origin,
    // and SameSite=Strict keeps the cookie home.
    const page = await browser.newPage();
    await page.goto('about:blank');
    const foreign = await page.evaluate(async (url) => {
      try {
        const r = await fetch(url, { credentials: 'include', mode: 'no-cors' });
        return `status ${String(r.status)} ${r.type}`;
      } catch (e) {
        return `refused ${String(e)}`;
      }
    }, transcript);
    expect(foreign).not.toContain('status 200');
    await page.close();
    expect(stack.api.head(conversationId)).toBe(head);
  });

  it('shows what the agent keeps, to a reader too, and follows a clear that names who asked', async () => {
    // The question of the earlier test is answered first: a waiting turn blocks new messages.
    const entries = await stack.api.turns.journal.entries(`conv-${conversationId}`);
    const question = entries.filter((e) => e.kind === 'question_request').at(-1);
    const requestId = question ? decodePayload('question_request', question.payload).requestId : '';
    await create(`questions/${requestId}`, { answer: 'two' });
    await post('I live in Lisbon; remember it.', 'm1');
    const page = await openConversation(asVera);
    await page.click('tr[data-conversation="hello"] a');
    await page.waitForSelector('#memory tr[data-key="city"]', { timeout: 30_000 });
    expect((await texts(page, '#memory tr[data-key="city"]'))[0]).toContain('Lisbon');
    // The memory panel (GET memory) and the timeline (the log stream) are two reads: the
    // panel can be filled before the stream has even connected, so the row is waited for.
    await page.waitForSelector('tr[data-kind="memory_set"]', { timeout: 30_000 });
    expect((await texts(page, 'tr[data-kind="memory_set"]'))[0]).toContain(
      'kept in memory: "city" = "Lisbon"',
    );
    const memoryPath = `${doorPath}/namespaces/${stack.namespace}/conversations/hello/memory/city`;
    // vera reads memory as she reads the transcript; she may not clear it.
    const refused = await kubeJson(vera, 'DELETE', memoryPath, {});
    expect(refused.status).toBe(403);
    const cleared = await kubeJson(dave, 'DELETE', memoryPath, {});
    expect(cleared.status).toBe(200);
    await page.waitForSelector('tr[data-kind="memory_cleared"]', { timeout: 30_000 });
    expect((await texts(page, 'tr[data-kind="memory_cleared"]'))[0]).toContain('kubernetes:dave');
    await page.waitForFunction(
      `document.querySelector('#memory')?.textContent === 'Memory is empty.'`,
      { timeout: 30_000 },
    );
    // The clear erased the value: the row keeps its place and kind, not its content.
    await page.waitForSelector('tr[data-kind="memory_set"].excised', { timeout: 30_000 });
    const erasedRow = (await texts(page, 'tr[data-kind="memory_set"]'))[0];
    expect(erasedRow).toContain('erased: only its leaf digest is kept');
    expect(erasedRow).not.toContain('Lisbon');
    await page.close();
    // The export verifies in the browser with the entry erased, and shows it as such (the
    // checkpoint in the status is the last turn's: the clear's batch comes after it).
    await publishStatus();
    const admin = await openConversation(asDave);
    await admin.click('tr[data-conversation="hello"] a');
    await admin.waitForSelector('tr[data-kind="memory_cleared"]', { timeout: 30_000 });
    expect(await verifyInPage(admin)).toMatchObject({ ok: 'true' });
    await admin.waitForSelector('tr[data-kind="memory_set"][data-seal="sealed"]', {
      timeout: 30_000,
    });
    const verified = (await texts(admin, 'tr[data-kind="memory_set"]'))[0];
    expect(verified).toContain('erased: only its leaf digest is kept');
    expect(verified).not.toContain('Lisbon');
    await admin.close();
  });

  it('shows a panel: each thread with its agent, its steps and its answer, and who gave the final answer', async () => {
    const ns = stack.namespace;
    panelHarness = await startScriptedHarness({
      replies: [],
      namespace: ns,
      approvalPublicKey: stack.api.turns.approvals.publicKey,
      logger: pino({ level: 'silent' }),
      // The coordinator's clock, which its credentials for the harness are minted by.
      nowMs: () => TEST_NOW_MS,
    });
    stack.api.turns.conversations.add(
      { owner: 'kubernetes:dave', agentRef: { name: 'lead' } },
      { name: 'panel', namespace: ns, status: readyStatus(panelHarness.endpoint) },
    );
    await createConversationObject(adminConfig, ns, 'panel', {
      owner: 'kubernetes:dave',
      agentRef: { name: 'lead' },
    });
    const reply = await create(
      'messages',
      { text: 'Was I charged twice in March?', idempotencyKey: 'p1' },
      stack.users.alice,
      'panel',
    );
    expect(reply.status).toBe('complete');
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    await page.goto(asDave.url, { waitUntil: 'load' });
    await page.waitForSelector('tr[data-conversation="panel"]', { timeout: 30_000 });
    await page.click('tr[data-conversation="panel"] a');
    await page.waitForSelector('tr[data-kind="turn_complete"]', { timeout: 30_000 });
    // Each thread opens with the lead's ask: its agent, its id, its task.
    const asks = await texts(page, 'tr[data-kind="tool_call"]');
    expect(asks).toEqual([
      expect.stringContaining(
        'leadasks researcher on thread toolu_ask_researcher: How much was billed in March?',
      ),
      expect.stringContaining(
        'leadasks checker on thread toolu_ask_checker: Was the March invoice paid twice?',
      ),
    ]);
    // Each thread's steps name their agent and thread, indented by its depth.
    const steps = await texts(page, 'tr[data-kind="model_call"][data-depth="1"]');
    expect(steps).toHaveLength(2);
    expect(steps).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/checker.*on thread toolu_ask_checker \(depth 1\)/u),
        expect.stringMatching(/researcher.*on thread toolu_ask_researcher \(depth 1\)/u),
      ]),
    );
    // Each thread's answer, from its agent.
    const answers = await texts(page, 'tr[data-kind="tool_result"]');
    expect(answers).toHaveLength(2);
    expect(answers).toEqual(
      expect.arrayContaining([
        expect.stringContaining(
          'checkeranswered on thread toolu_ask_checker: checker says: 33 chars',
        ),
        expect.stringContaining(
          'researcheranswered on thread toolu_ask_researcher: researcher says: 29 chars',
        ),
      ]),
    );
    // The final answer: the lead's, on the turn's own thread, after both threads.
    const final = (await texts(page, 'tr[data-kind="turn_complete"]'))[0];
    expect(final).toContain(`leadreplied: ${String(reply.reply)}`);
    expect(final).toContain(
      "the final answer, by lead on the turn's own thread, after threads toolu_ask_researcher, toolu_ask_checker",
    );
    await screenshot(page, 'panel');
    await page.close();
  });
});
