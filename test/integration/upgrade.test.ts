/**
 * The upgrade from the previous release (hack/release/previous.json) to this checkout, with
 * live conversations (docs/operations.md, "Upgrading"). The previous release is built from
 * this repository's own history: its commit checked out into a temporary git worktree, its
 * own `npm ci` there, and its own `make release` into a registry on this machine
 * (support/previous-release.ts). This checkout's release goes to the same repositories
 * (`make release`, RELEASE_TEST_IMAGES reused as release.test.ts does).
 *
 * The previous release's polychrome.yaml is installed on an empty cluster of its own, every
 * pod pulled from the registry by its pinned digest (support/release-install.ts); a
 * namespace onboards and a Conversation answers its first turn. Then this release's
 * polychrome.yaml is applied server-side over the running install, and every workload rolls
 * to the new digests. The Conversation from before answers a second turn; its journal holds
 * both turns and verifies on the state plane and offline (the signing key and the
 * checkpoint of its status pinned); the first turn's entries are byte for byte what they
 * were before the upgrade; and a Conversation made after the upgrade answers too, on a
 * harness of this release's image (the warm pool replaced those warmed before).
 *
 * It needs root, like release.test.ts, and this clone's history back to the pinned commit.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { partitionOf } from '../../common/partition-name';
import { repoRoot } from '../../hack/lib/paths';
import { type PreviousRelease, readPreviousRelease } from '../../hack/release/previous';
import {
  checkoutPrevious,
  removePrevious,
  requirePreviousCommit,
} from './support/previous-release';
import {
  type BuiltRelease,
  cosignKeyPair,
  makeRelease,
  requireReleaseTools,
  thisRelease,
} from './support/release-build';
import {
  inStep,
  type InstalledRelease,
  installRelease,
  onboardNamespace,
  sendMessage,
  type StateAccess,
  stateAccess,
  stateCli,
  startConversation,
} from './support/release-install';
import {
  applyUpgrade,
  exportAndVerify,
  harnessImageOf,
  type JournalExport,
  payloadText,
  signingPublicKey,
  statusCheckpoint,
  waitOnImages,
  waitSandboxBundle,
} from './support/release-upgrade';
import { applyManifest } from './support/release-install-steps';
import { startRegistry, type LocalRegistry } from './support/registry';

const work = mkdtempSync(join(tmpdir(), 'polychrome-upgrade-'));
const source = join(work, 'previous-source');
const TEAM = 'upgrade-team';
const PLANES = ['control-plane', 'state', 'harness'] as const;
const FIRST = { text: 'first turn, on the previous release', idempotencyKey: 'upgrade-1' };
const SECOND = { text: 'second turn, after the upgrade', idempotencyKey: 'upgrade-2' };
const AFTER = { text: 'a conversation made after the upgrade', idempotencyKey: 'upgrade-3' };

/** How long each part took, in ms, for the report at the end. */
const timings: Record<string, number> = {};
async function timed<T>(name: string, step: () => T | Promise<T>): Promise<T> {
  const began = Date.now();
  try {
    return await step();
  } finally {
    timings[name] = Date.now() - began;
  }
}

/** A turn's answer as the test compares it: the public API's status and the turn's. */
const answered = (a: { status: number; body: unknown }): unknown => ({
  status: a.status,
  body: a.body,
});
const COMPLETE = { status: 200, body: expect.objectContaining({ status: 'complete' }) };

describe('upgrading from the previous release with live conversations', () => {
  let pin: PreviousRelease;
  let registry: LocalRegistry | undefined;
  let previous: BuiltRelease;
  let current: BuiltRelease;
  let release: InstalledRelease | undefined;
  let before: { uid: string; journal: JournalExport } | undefined;
  let upgraded = false;

  /** The install, or the reason an earlier step left none. */
  const installed = (): InstalledRelease => {
    if (release === undefined) throw new Error('the previous release was not installed (above)');
    return release;
  };
  const access = (dir: string): Promise<StateAccess> => stateAccess(installed(), join(work, dir));

  beforeAll(async () => {
    requireReleaseTools(['crane', 'cosign', 'kubectl', 'helm']);
    pin = readPreviousRelease();
    requirePreviousCommit(pin);
    registry = await startRegistry(work);
    // One repository per plane for both releases, as a vendor publishes them: two tags.
    const prefix = `${registry.host}/polychrome`;
    const { key } = cosignKeyPair(work, 'key');
    await timed('previous release: worktree and npm ci', () => checkoutPrevious(pin, source));
    previous = await timed('previous release: make release (images built)', () =>
      makeRelease({
        checkout: source,
        prefix,
        version: pin.version,
        key,
        out: join(work, 'previous'),
      }),
    );
    const { version, images } = thisRelease();
    current = await timed('this release: make release', () =>
      makeRelease({ checkout: repoRoot, prefix, version, key, out: join(work, 'current'), images }),
    );
  }, 45 * 60_000);

  afterAll(async () => {
    await timed('teardown: the install stopped', async () => release?.close());
    await registry?.stop();
    await timed("teardown: the previous release's worktree removed", () => removePrevious(source));
    process.stderr.write(`upgrade test: ${JSON.stringify(timings)} ms\n`);
    rmSync(work, { recursive: true, force: true });
  });

  it('releases each plane anew: the two releases pin different digests', () => {
    for (const plane of PLANES) {
      expect(previous.pinned[plane]).toMatch(/@sha256:[0-9a-f]{64}$/u);
      expect({ plane, changed: previous.pinned[plane] !== current.pinned[plane] }).toEqual({
        plane,
        changed: true,
      });
    }
  });

  it(
    'installs the previous release, and a Conversation answers its first turn',
    async () => {
      release = await timed('previous release: install to planes Ready', () =>
        installRelease(
          join(work, 'install'),
          applyManifest(join(work, 'previous', 'polychrome.yaml')),
        ),
      );
      const r = release;
      await inStep(r, 'the previous release on its pinned images', () =>
        waitOnImages(r, previous.pinned, 4),
      );
      const lap = Date.now();
      await inStep(r, `onboarding ${TEAM} on the previous release`, () =>
        onboardNamespace(r, TEAM),
      );
      const uid = await inStep(r, 'the Conversation "before" Ready on the previous release', () =>
        startConversation(r, TEAM, 'before'),
      );
      const state = await access('state-before');
      const first = await inStep(r, 'the first turn, on the previous release', () =>
        sendMessage(r, state, uid, FIRST),
      );
      expect(answered(first)).toEqual(COMPLETE);
      const journal = await inStep(r, 'exporting the journal before the upgrade', async () =>
        exportAndVerify(state, uid, join(work, 'before.jsonl'), {
          publicKey: await signingPublicKey(r),
          checkpoint: await statusCheckpoint(r, TEAM, 'before'),
        }),
      );
      expect(journal.offline.code).toBe(0);
      expect(payloadText(journal.events)).toContain(FIRST.text);
      before = { uid, journal };
      timings['previous release: onboard, conversation, first turn'] = Date.now() - lap;
    },
    20 * 60_000,
  );

  it(
    "applies this release's polychrome.yaml over it: every workload rolls to the new digests",
    async () => {
      const r = installed();
      await timed('upgrade: apply to every workload rolled', () =>
        inStep(r, "applying this release's polychrome.yaml over the previous one", () =>
          applyUpgrade(r, join(work, 'current', 'polychrome.yaml'), current.pinned),
        ),
      );
      upgraded = true;
    },
    10 * 60_000,
  );

  it(
    'the Conversation from before answers a second turn; its journal holds both, verifies, and the first turn is unchanged byte for byte',
    async () => {
      const r = installed();
      if (before === undefined || !upgraded)
        throw new Error('no conversation from before the upgrade, or no upgrade (above)');
      const { uid, journal } = before;
      const lap = Date.now();
      const state = await access('state-after');
      const second = await inStep(r, 'the second turn, after the upgrade', () =>
        sendMessage(r, state, uid, SECOND),
      );
      expect(answered(second)).toEqual(COMPLETE);
      const verify = await inStep(r, 'state verify after the upgrade', () =>
        stateCli(state, ['state', 'verify', partitionOf(uid)]),
      );
      expect({ code: verify.code, stdout: verify.stdout }).toEqual({
        code: 0,
        stdout: expect.stringMatching(
          new RegExp(`^${partitionOf(uid)}: OK: [1-9]\\d* events`, 'mu'),
        ),
      });
      const after = await inStep(r, 'exporting the journal after the upgrade', async () =>
        exportAndVerify(state, uid, join(work, 'after.jsonl'), {
          publicKey: await signingPublicKey(r),
          // A checkpoint of the second turn: past every entry the first export held.
          checkpoint: await statusCheckpoint(r, TEAM, 'before', journal.events.length + 1),
        }),
      );
      expect(after.offline).toEqual({ code: 0, stdout: expect.any(String), stderr: '' });
      // What was committed before the upgrade, byte for byte, then the second turn.
      expect(after.events.length).toBeGreaterThan(journal.events.length);
      expect(after.events.slice(0, journal.events.length)).toEqual(journal.events);
      const text = payloadText(after.events);
      expect({ first: text.includes(FIRST.text), second: text.includes(SECOND.text) }).toEqual({
        first: true,
        second: true,
      });
      timings['upgraded: second turn, verify, export'] = Date.now() - lap;
    },
    10 * 60_000,
  );

  it(
    'a Conversation made after the upgrade answers',
    async () => {
      const r = installed();
      if (!upgraded) throw new Error('the upgrade did not complete (above)');
      const lap = Date.now();
      // The new provisioner rewrites the namespace's template with this release's harness
      // image and the warm pool with Recreate, which replaces the harnesses warmed before.
      await inStep(r, `the sandbox bundle of ${TEAM} on this release`, () =>
        waitSandboxBundle(r, TEAM, current.pinned['harness'] ?? ''),
      );
      const uid = await inStep(r, 'the Conversation "after" Ready on this release', () =>
        startConversation(r, TEAM, 'after'),
      );
      const state = await access('state-new');
      const answer = await inStep(
        r,
        'the first turn of a Conversation made after the upgrade',
        () => sendMessage(r, state, uid, AFTER),
      );
      expect(answered(answer)).toEqual(COMPLETE);
      const verify = await stateCli(state, ['state', 'verify', partitionOf(uid)]);
      expect(verify.code).toBe(0);
      expect(JSON.stringify(r.model.bodies)).toContain(AFTER.text);
      // Its harness runs this release's image: none warmed before the upgrade was handed out.
      expect(await harnessImageOf(r, TEAM, 'after')).toBe(current.pinned['harness']);
      timings['upgraded: new conversation, turn, verify'] = Date.now() - lap;
    },
    10 * 60_000,
  );
});
