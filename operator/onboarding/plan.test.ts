import { describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';

import { harnessCertificateProblem } from '../../common/harness-identity';
import { DEFAULT_LIFETIMES } from '../provision/catalog';
import { signedBy, type SecretData } from '../provision/inspect';
import { mintCa, type MintedPair } from '../provision/x509-mint';
import { BUNDLE_OBJECTS, ONBOARDED_REFS, refKey, type ObjectRef } from './catalog';
import { desiredBundleObject, type Manifest } from './desired';
import { issueHarnessTls } from './issue';
import {
  planOnboarding,
  secretData,
  type CredentialSources,
  type ObservedObject,
  type OnboardingAction,
} from './plan';
import { SANDBOX_BUNDLE } from './sandbox-bundle';

// The decision on its own: a Namespace's labels, what is in it and the provisioner's
// Secrets → what to write. A state after a pass is built by applying the pass's writes as
// the API server would keep them (issued certificates are minted for real), so "a second
// pass does nothing" is checked against what the first one wrote.

const NS = 'team-a';
const CP = 'polychrome-system';
const DAY = 86_400_000;
const T0 = new Date('2026-12-01T00:00:00Z');
const at = (days: number): Date => new Date(T0.getTime() + days * DAY);
const ON = { 'polychrome.dev/enabled': 'true' };

function ca(name: string, now = T0): MintedPair {
  return mintCa({
    commonName: name,
    notBefore: now,
    notAfter: new Date(now.getTime() + 3650 * DAY),
  });
}

function sourcesOf(
  harnessCa: MintedPair | undefined,
  publicKey = 'ab'.repeat(32),
): CredentialSources {
  const bytes = (s: string): Buffer => Buffer.from(s);
  return {
    harnessCa:
      harnessCa === undefined
        ? undefined
        : {
            'ca.crt': bytes(harnessCa.certificate),
            'tls.crt': bytes(harnessCa.certificate),
            'tls.key': bytes(harnessCa.privateKey),
          },
    approvalKey: { 'key.pem': bytes('unused'), 'public-key': bytes(publicKey) },
  };
}

type Store = Map<string, ObservedObject>;
let version = 0;

function stored(object: Manifest, owned = true, deleting = false): ObservedObject {
  version += 1;
  return { owned, uid: `uid-${version}`, resourceVersion: String(version), deleting, body: object };
}

function planWith(
  labels: Record<string, string>,
  store: Store,
  sources: CredentialSources,
  now = T0,
  extra: { deleting?: boolean; namespace?: string; image?: string; cp?: string } = {},
): OnboardingAction[] {
  return planOnboarding({
    namespace: { name: extra.namespace ?? NS, labels, deleting: extra.deleting ?? false },
    placement: {
      controlPlaneNamespace: extra.cp ?? CP,
      ...(extra.image === undefined ? {} : { harnessImage: extra.image }),
    },
    sources,
    observed: store,
    now,
    lifetimes: DEFAULT_LIFETIMES,
  });
}

/** Applies the writes of `actions` to `store`, as the API server would keep them. */
function write(store: Store, actions: readonly OnboardingAction[], now = T0, ns = NS): void {
  for (const a of actions) {
    if (a.op === 'create' || a.op === 'apply') store.set(refKey(a.ref), stored(a.object));
    if (a.op === 'issue') {
      store.set(refKey(a.ref), stored(issueHarnessTls(ns, a.from, now, DEFAULT_LIFETIMES)));
    }
    if (a.op === 'delete') store.delete(refKey(a.ref));
  }
}

const summary = (actions: readonly OnboardingAction[]): string[] =>
  actions.map((a) => `${a.op} ${a.ref.kind} ${a.ref.name}`);

const ALL_CREATED = [
  'create Secret polychrome-harness',
  'issue Secret polychrome-harness-tls',
  'create NetworkPolicy polychrome-harness',
  'create SandboxTemplate polychrome-harness',
  'create SandboxWarmPool polychrome-harness',
];

function onboarded(harnessCa: MintedPair, now = T0): Store {
  const store: Store = new Map();
  write(store, planWith(ON, store, sourcesOf(harnessCa), now), now);
  return store;
}

function get(store: Store, name: string, kind = 'Secret'): ObservedObject {
  const ref = ONBOARDED_REFS.find((r) => r.kind === kind && r.name === name) as ObjectRef;
  return store.get(refKey(ref)) as ObservedObject;
}

const certOf = (store: Store): X509Certificate =>
  new X509Certificate(
    (secretData(get(store, 'polychrome-harness-tls').body)['tls.crt'] as Buffer).toString(),
  );

describe('planOnboarding: the label decides', () => {
  const harnessCa = ca('harness CA');

  it('a labelled, empty namespace gets the credentials first, then config/sandbox, and a second pass does nothing', () => {
    const store: Store = new Map();
    const first = planWith(ON, store, sourcesOf(harnessCa));
    expect(summary(first)).toEqual(ALL_CREATED);
    write(store, first);
    expect(planWith(ON, store, sourcesOf(harnessCa))).toEqual([]);
    const cert = certOf(store);
    expect(harnessCertificateProblem(cert.toString(), NS)).toBeUndefined();
    expect(signedBy(cert, new X509Certificate(harnessCa.certificate))).toBe(true);
    const harness = secretData(get(store, 'polychrome-harness').body);
    expect(harness['approval-public-key']?.toString()).toBe('ab'.repeat(32));
  });

  it.each<[string, Record<string, string>, boolean]>([
    ['no label', {}, false],
    ['value false', { 'polychrome.dev/enabled': 'false' }, false],
    ['value TRUE (only true counts)', { 'polychrome.dev/enabled': 'TRUE' }, false],
    ['another label set to true', { 'polychrome.dev/enable': 'true' }, false],
    ['value true', ON, true],
  ])('%s', (_, labels, onboards) => {
    const actions = planWith(labels, new Map(), sourcesOf(harnessCa));
    expect(actions.length > 0).toBe(onboards);
  });

  it('unlabelled: deletes exactly our objects, by the uid read, and leaves the rest', () => {
    const store = onboarded(harnessCa);
    // A tenant's ConfigMap-like object cannot be here; a Secret of our name that is not ours can.
    const tenants = { ...get(store, 'polychrome-harness'), owned: false, uid: 'tenant' };
    store.set(refKey(ONBOARDED_REFS[0] as ObjectRef), tenants);
    const actions = planWith({}, store, sourcesOf(harnessCa));
    expect(summary(actions)).toEqual([
      'delete Secret polychrome-harness-tls',
      'delete NetworkPolicy polychrome-harness',
      'delete SandboxTemplate polychrome-harness',
      'delete SandboxWarmPool polychrome-harness',
    ]);
    const tls = get(store, 'polychrome-harness-tls');
    expect(actions[0]).toEqual({ op: 'delete', ref: ONBOARDED_REFS[1], uid: tls.uid });
    write(store, actions);
    expect(planWith({}, store, sourcesOf(harnessCa))).toEqual([]);
  });

  it('a namespace being deleted is offboarded, and nothing is created in it', () => {
    const store = onboarded(harnessCa);
    const actions = planWith(ON, store, sourcesOf(harnessCa), T0, { deleting: true });
    expect(actions.every((a) => a.op === 'delete')).toBe(true);
    expect(planWith(ON, new Map(), sourcesOf(harnessCa), T0, { deleting: true })).toEqual([]);
  });
});

describe('planOnboarding: objects that are not ours', () => {
  const harnessCa = ca('harness CA');

  it.each(ONBOARDED_REFS.map((r) => [`${r.kind} ${r.name}`, r] as const))(
    'a %s without our label is refused by name and not written; the rest is installed',
    (_, ref) => {
      const store: Store = new Map();
      store.set(refKey(ref), {
        owned: false,
        uid: 'theirs',
        resourceVersion: '7',
        deleting: false,
        body: { metadata: { name: ref.name, labels: { 'app.kubernetes.io/managed-by': 'me' } } },
      });
      const actions = planWith(ON, store, sourcesOf(harnessCa));
      const conflict = actions.filter((a) => a.op === 'conflict');
      expect(conflict).toHaveLength(1);
      expect(conflict[0]).toMatchObject({ ref, uid: 'theirs' });
      const message = conflict[0]?.op === 'conflict' ? conflict[0].message : '';
      expect(message).toContain(`namespace ${NS} has ${ref.kind} ${ref.name}`);
      expect(message).toContain('app.kubernetes.io/managed-by=polychrome-onboarding');
      expect(message).toContain('delete it');
      expect(actions.filter((a) => a.op !== 'conflict')).toHaveLength(ALL_CREATED.length - 1);
      expect(actions.some((a) => a.op !== 'conflict' && refKey(a.ref) === refKey(ref))).toBe(false);
    },
  );

  it('ours being deleted while labelled: waits, then is made again', () => {
    const store = onboarded(harnessCa);
    const ref = ONBOARDED_REFS[2] as ObjectRef;
    store.set(refKey(ref), { ...(store.get(refKey(ref)) as ObservedObject), deleting: true });
    expect(summary(planWith(ON, store, sourcesOf(harnessCa)))).toEqual([
      `wait ${ref.kind} ${ref.name}`,
    ]);
  });
});

describe('planOnboarding: credentials follow their sources', () => {
  it('without the provisioner’s Secrets the credentials wait, saying which Secret is missing', () => {
    const actions = planWith(ON, new Map(), { harnessCa: undefined, approvalKey: undefined });
    const waits = actions.filter((a) => a.op === 'wait');
    expect(waits.map((a) => (a.op === 'wait' ? a.message : ''))).toEqual([
      expect.stringContaining('polychrome-approval-key is not in namespace polychrome-system'),
      expect.stringContaining('polychrome-harness-ca is not in namespace polychrome-system'),
    ]);
    expect(actions.filter((a) => a.op === 'create')).toHaveLength(3);
  });

  it('a malformed approval public key waits rather than being copied', () => {
    const actions = planWith(ON, new Map(), sourcesOf(ca('x'), 'not-hex'));
    expect(actions[0]).toMatchObject({
      op: 'wait',
      message: expect.stringContaining('64 hex digits'),
    });
  });

  it('a rotated approval key is applied over ours, at the version read', () => {
    const harnessCa = ca('harness CA');
    const store = onboarded(harnessCa);
    const actions = planWith(ON, store, sourcesOf(harnessCa, 'cd'.repeat(32)));
    expect(summary(actions)).toEqual(['apply Secret polychrome-harness']);
    expect(actions[0]).toMatchObject({
      resourceVersion: get(store, 'polychrome-harness').resourceVersion,
    });
  });

  it('a rotated harness CA reissues the certificate from the new key', () => {
    const old = ca('old');
    const store = onboarded(old);
    const next = ca('new', at(10));
    const actions = planWith(ON, store, sourcesOf(next), at(10));
    expect(summary(actions)).toEqual(['issue Secret polychrome-harness-tls']);
    expect(actions[0]).toMatchObject({ reason: 'not signed by the harness CA in use' });
    write(store, actions, at(10));
    expect(signedBy(certOf(store), new X509Certificate(next.certificate))).toBe(true);
    expect(planWith(ON, store, sourcesOf(next), at(10))).toEqual([]);
  });

  it('renews the certificate at two thirds of its life, not before', () => {
    const harnessCa = ca('harness CA');
    const store = onboarded(harnessCa);
    expect(planWith(ON, store, sourcesOf(harnessCa), at(240))).toEqual([]);
    expect(summary(planWith(ON, store, sourcesOf(harnessCa), at(245)))).toEqual([
      'issue Secret polychrome-harness-tls',
    ]);
  });

  it('a certificate copied in from another namespace is replaced: it does not name this one', () => {
    const harnessCa = ca('harness CA');
    const other = onboarded(harnessCa);
    const mine = onboarded(harnessCa);
    const tlsRef = ONBOARDED_REFS[1] as ObjectRef;
    const copied = issueHarnessTls('team-b', sourcesFrom(harnessCa), T0, DEFAULT_LIFETIMES);
    mine.set(refKey(tlsRef), stored(copied));
    const actions = planWith(ON, mine, sourcesOf(harnessCa));
    expect(actions).toEqual([
      expect.objectContaining({
        op: 'issue',
        reason: expect.stringContaining('polychrome-harness.team-a'),
      }),
    ]);
    expect(other.size).toBe(ONBOARDED_REFS.length);
  });

  it('a broken certificate of ours is reissued', () => {
    const harnessCa = ca('harness CA');
    const store = onboarded(harnessCa);
    const tls = get(store, 'polychrome-harness-tls');
    const body = tls.body as Manifest;
    const broken: SecretData = { 'tls.crt': Buffer.from('junk') };
    store.set(refKey(ONBOARDED_REFS[1] as ObjectRef), {
      ...tls,
      body: { ...body, data: { 'tls.crt': broken['tls.crt']?.toString('base64') } },
    });
    expect(summary(planWith(ON, store, sourcesOf(harnessCa)))).toEqual([
      'issue Secret polychrome-harness-tls',
    ]);
  });
});

function sourcesFrom(harnessCa: MintedPair): { signer: MintedPair; bundle: string } {
  return { signer: harnessCa, bundle: harnessCa.certificate };
}

describe('planOnboarding: config/sandbox as the namespace gets it', () => {
  const harnessCa = ca('harness CA');

  it('installs every object of config/sandbox, kinds and API versions as built there', () => {
    const created = planWith(ON, new Map(), sourcesOf(harnessCa)).filter((a) => a.op === 'create');
    const kinds = created.filter((a) => a.ref.kind !== 'Secret').map((a) => a.ref);
    expect(kinds.map(refKey).sort()).toEqual(
      SANDBOX_BUNDLE.map((o) =>
        refKey({ apiVersion: o.apiVersion, kind: o.kind, name: o.metadata.name }),
      ).sort(),
    );
  });

  it('points the namespace selectors at the control plane’s namespace and sets the harness image', () => {
    const template = BUNDLE_OBJECTS.find((o) => o.kind === 'SandboxTemplate');
    const out = desiredBundleObject(template as (typeof BUNDLE_OBJECTS)[number], NS, {
      controlPlaneNamespace: 'pc-ops',
      harnessImage: 'registry.example/harness@sha256:abc',
    });
    const text = JSON.stringify(out);
    expect(text).not.toContain('polychrome-system');
    expect(text).toContain('"kubernetes.io/metadata.name":"pc-ops"');
    expect(text).toContain('"kubernetes.io/metadata.name":"monitoring"');
    expect(text).toContain('registry.example/harness@sha256:abc');
    expect(out.metadata).toMatchObject({
      namespace: NS,
      labels: { 'app.kubernetes.io/managed-by': 'polychrome-onboarding' },
    });
  });

  it('puts back an object of ours someone changed, and ignores fields the API server added', () => {
    const store = onboarded(harnessCa);
    const ref = ONBOARDED_REFS.find((r) => r.kind === 'SandboxWarmPool') as ObjectRef;
    const ours = store.get(refKey(ref)) as ObservedObject;
    const body = ours.body as Manifest;
    const defaulted = {
      ...body,
      status: { replicas: 2 },
      metadata: { ...body.metadata, uid: 'u' },
    };
    store.set(refKey(ref), { ...ours, body: defaulted });
    expect(planWith(ON, store, sourcesOf(harnessCa))).toEqual([]);
    const spec = (body['spec'] ?? {}) as Record<string, unknown>;
    store.set(refKey(ref), { ...ours, body: { ...body, spec: { ...spec, replicas: 50 } } });
    expect(summary(planWith(ON, store, sourcesOf(harnessCa)))).toEqual([
      'apply SandboxWarmPool polychrome-harness',
    ]);
  });
});
