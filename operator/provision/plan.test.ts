import { describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';

import { CONTROL_PLANE_ROLES, DEFAULT_LIFETIMES, SECRET_NAMES, SecretName } from './catalog';
import { certificatesOf } from './inspect';
import { contentOf } from './materials';
import { plan, type Action, type ObservedSecret } from './plan';
import { mintCa, mintLeaf } from './x509-mint';

// The core on its own: which Secrets exist and what they hold → what to write. Secrets are
// written here through materials.ts (the real minting), as the shell writes them, so a
// state after a pass is the state the API server would hold.

const NS = 'polychrome-system';
const DAY = 86_400_000;
const T0 = new Date('2026-12-01T00:00:00Z');
const at = (days: number): Date => new Date(T0.getTime() + days * DAY);

type Secrets = Map<string, ObservedSecret>;

function planAt(secrets: Secrets, now: Date, external: readonly string[] = []): Action[] {
  return plan({
    namespace: NS,
    now,
    lifetimes: DEFAULT_LIFETIMES,
    external: new Set(external),
    secrets,
  });
}

const writes = (actions: readonly Action[]): Action[] =>
  actions.filter((a) => a.op === 'create' || a.op === 'replace');
const names = (actions: readonly Action[]): string[] => actions.map((a) => `${a.op} ${a.name}`);

let version = 0;

/** Writes every create and replace of `actions` into `secrets`, as the API server would keep them. */
function write(secrets: Secrets, actions: readonly Action[], now: Date): void {
  for (const a of actions) {
    if (a.op !== 'create' && a.op !== 'replace') continue;
    const { data } = contentOf(a.material, now, DEFAULT_LIFETIMES);
    version += 1;
    secrets.set(a.name, {
      owned: true,
      resourceVersion: String(version),
      data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v)])),
    });
  }
}

/** Passes until one writes nothing; the actions of each pass. */
function settle(secrets: Secrets, now: Date, external: readonly string[] = []): Action[][] {
  const passes: Action[][] = [];
  for (let i = 0; i < 5; i += 1) {
    const actions = planAt(secrets, now, external);
    passes.push(actions);
    if (writes(actions).length === 0) return passes;
    write(secrets, actions, now);
  }
  throw new Error('did not settle');
}

function installed(): Secrets {
  const secrets: Secrets = new Map();
  settle(secrets, T0);
  return secrets;
}

const pem = (s: Secrets, name: string, key: string): string =>
  s.get(name)?.data[key]?.toString('utf8') ?? '';
const cert = (s: Secrets, name: string): X509Certificate =>
  new X509Certificate(pem(s, name, 'tls.crt'));

function userSecret(data: Record<string, string>): ObservedSecret {
  return {
    owned: false,
    resourceVersion: 'u1',
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v)])),
  };
}

describe('plan: what the provisioner writes', () => {
  it('on an empty namespace creates all seven Secrets, CAs and keys first, leaves once their CA exists', () => {
    const secrets: Secrets = new Map();
    const passes = settle(secrets, T0);
    expect(passes.map(names)).toEqual([
      [
        'create polychrome-state-ca',
        'create polychrome-harness-ca',
        'create polychrome-state-signing-key',
        'create polychrome-state-records-key',
        'create polychrome-approval-key',
      ],
      ['create polychrome-state-tls', 'create polychrome-control-plane-tls'],
      [],
    ]);
    expect([...secrets.keys()].sort()).toEqual([...SECRET_NAMES].sort());
    const ca = cert(secrets, SecretName.StateCa);
    for (const leaf of [SecretName.StateTls, SecretName.ControlPlaneTls]) {
      expect(cert(secrets, leaf).verify(ca.publicKey)).toBe(true);
      expect(pem(secrets, leaf, 'ca.crt')).toBe(pem(secrets, SecretName.StateCa, 'ca.crt'));
    }
    expect(
      cert(secrets, SecretName.StateTls).checkHost(`polychrome-state.${NS}.svc`),
    ).toBeDefined();
    expect(cert(secrets, SecretName.ControlPlaneTls).subject.split('\n').sort()).toEqual([
      'CN=polychrome-control-plane',
      'O=polychrome:control-plane-replica',
      'O=polychrome:erase',
      'O=polychrome:repair',
      'O=polychrome:retire',
      'O=polychrome:writer',
    ]);
    // The harness CA is its own, not the state plane's.
    expect(cert(secrets, SecretName.HarnessCa).fingerprint256).not.toBe(ca.fingerprint256);
    expect(pem(secrets, SecretName.ApprovalKey, 'public-key')).toMatch(/^[0-9a-f]{64}$/);
    expect(pem(secrets, SecretName.RecordsKey, 'records-key')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('writes nothing when everything is there and valid, however often it runs', () => {
    const secrets = installed();
    expect(planAt(secrets, T0)).toEqual([]);
    expect(planAt(secrets, at(200))).toEqual([]);
  });

  it('renews a leaf at two thirds of its year, from the same CA, and nothing else', () => {
    const secrets = installed();
    const caBefore = pem(secrets, SecretName.StateCa, 'tls.crt');
    const actions = planAt(secrets, at(250));
    expect(names(actions)).toEqual([
      'replace polychrome-state-tls',
      'replace polychrome-control-plane-tls',
    ]);
    expect(actions.every((a) => a.op === 'replace' && /due for renewal/.test(a.reason))).toBe(true);
    write(secrets, actions, at(250));
    expect(pem(secrets, SecretName.StateCa, 'tls.crt')).toBe(caBefore);
    expect(new Date(cert(secrets, SecretName.StateTls).validTo) > at(600)).toBe(true);
    expect(planAt(secrets, at(250))).toEqual([]);
  });

  it('rotates a CA with an overlap: ca.crt holds the new CA and the old until the old expires', () => {
    const secrets = installed();
    const oldCa = cert(secrets, SecretName.StateCa);
    const now = at(365 * 7); // past two thirds of ten years
    settle(secrets, now);
    const newCa = cert(secrets, SecretName.StateCa);
    expect(newCa.fingerprint256).not.toBe(oldCa.fingerprint256);
    const bundle = certificatesOf(pem(secrets, SecretName.StateCa, 'ca.crt'));
    expect(bundle.map((c) => c.fingerprint256)).toEqual([
      newCa.fingerprint256,
      oldCa.fingerprint256,
    ]);
    for (const leaf of [SecretName.StateTls, SecretName.ControlPlaneTls]) {
      expect(cert(secrets, leaf).verify(newCa.publicKey)).toBe(true);
      expect(certificatesOf(pem(secrets, leaf, 'ca.crt'))).toHaveLength(2);
    }
    // Once the old CA has expired, it leaves the bundles.
    const later = at(3651);
    const passes = settle(secrets, later);
    expect(passes.flatMap(names)).toContain('replace polychrome-state-ca');
    for (const name of [SecretName.StateCa, SecretName.StateTls, SecretName.ControlPlaneTls]) {
      expect(certificatesOf(pem(secrets, name, 'ca.crt')).map((c) => c.fingerprint256)).toEqual([
        newCa.fingerprint256,
      ]);
    }
    expect(cert(secrets, SecretName.StateCa).fingerprint256).toBe(newCa.fingerprint256);
  });

  it('reissues its own leaf that is broken or from another CA, but never replaces a key', () => {
    const secrets = installed();
    const leaf = secrets.get(SecretName.StateTls);
    if (leaf === undefined) throw new Error('no leaf');
    secrets.set(SecretName.StateTls, {
      ...leaf,
      data: { ...leaf.data, 'tls.key': Buffer.from('x') },
    });
    const signing = secrets.get(SecretName.SigningKey);
    if (signing === undefined) throw new Error('no key');
    secrets.set(SecretName.SigningKey, {
      ...signing,
      data: { 'signing-key': Buffer.from('junk') },
    });
    const actions = planAt(secrets, T0);
    expect(names(actions)).toEqual([
      'replace polychrome-state-tls',
      'problem polychrome-state-signing-key',
    ]);
    expect(actions[1]).toMatchObject({
      message: expect.stringMatching(
        /signing-key does not parse as a private key.*restore it from your backup/,
      ),
    });
  });
});

describe("plan: the user's Secrets", () => {
  it('checks a user Secret, never writes it, and names what is wrong', () => {
    const secrets = installed();
    const ca = mintCa({ commonName: 'their CA', notBefore: T0, notAfter: at(3650) });
    const wrongName = mintLeaf(
      { commonName: 'state', dnsNames: ['state.example'], notBefore: T0, notAfter: at(365) },
      'server',
      ca,
    );
    secrets.set(
      SecretName.StateTls,
      userSecret({
        'ca.crt': ca.certificate,
        'tls.crt': wrongName.certificate,
        'tls.key': wrongName.privateKey,
      }),
    );
    const noRoles = mintLeaf(
      {
        commonName: 'polychrome-control-plane',
        organizations: ['polychrome:writer'],
        notBefore: T0,
        notAfter: at(365),
      },
      'both',
      ca,
    );
    secrets.set(
      SecretName.ControlPlaneTls,
      userSecret({
        'ca.crt': ca.certificate,
        'tls.crt': noRoles.certificate,
        'tls.key': noRoles.privateKey,
      }),
    );
    const actions = planAt(secrets, T0);
    expect(writes(actions)).toEqual([]);
    expect(actions).toEqual([
      {
        op: 'problem',
        name: SecretName.StateTls,
        message: expect.stringContaining(
          `polychrome-state-tls tls.crt names DNS:state.example, not DNS:polychrome-state.${NS}.svc: fix or delete the Secret polychrome-state-tls`,
        ),
      },
      {
        op: 'problem',
        name: SecretName.ControlPlaneTls,
        message: expect.stringContaining(
          "tls.crt's subject lacks O polychrome:repair, O polychrome:erase, O polychrome:retire, O polychrome:control-plane-replica",
        ),
      },
    ]);
  });

  it('accepts valid user certificates from their own CA without needing its key, and checks the two sides trust each other', () => {
    const ca = mintCa({ commonName: 'their CA', notBefore: T0, notAfter: at(3650) });
    const other = mintCa({ commonName: 'another CA', notBefore: T0, notAfter: at(3650) });
    const server = mintLeaf(
      {
        commonName: 'polychrome-state',
        dnsNames: [`polychrome-state.${NS}.svc`],
        notBefore: T0,
        notAfter: at(365),
      },
      'server',
      other,
    );
    const client = mintLeaf(
      {
        commonName: 'polychrome-control-plane',
        organizations: CONTROL_PLANE_ROLES,
        notBefore: T0,
        notAfter: at(365),
      },
      'both',
      ca,
    );
    const secrets: Secrets = new Map([
      [
        SecretName.StateTls,
        userSecret({
          'ca.crt': other.certificate,
          'tls.crt': server.certificate,
          'tls.key': server.privateKey,
        }),
      ],
      [
        SecretName.ControlPlaneTls,
        userSecret({
          'ca.crt': ca.certificate,
          'tls.crt': client.certificate,
          'tls.key': client.privateKey,
        }),
      ],
      [SecretName.HarnessCa, userSecret({ 'ca.crt': ca.certificate })],
    ]);
    const actions = planAt(secrets, T0);
    // No state CA is made: nothing of the operator's is issued from it.
    expect(names(actions)).toEqual([
      'problem polychrome-state-tls',
      'problem polychrome-control-plane-tls',
      'create polychrome-state-signing-key',
      'create polychrome-state-records-key',
      'create polychrome-approval-key',
    ]);
    expect(actions[0]).toMatchObject({
      message: expect.stringMatching(
        /polychrome-state-tls's tls.crt is not signed by a CA in polychrome-control-plane-tls's ca.crt/,
      ),
    });
    // One bundle of both CAs on both sides: valid.
    const both = ca.certificate + other.certificate;
    secrets.set(
      SecretName.StateTls,
      userSecret({ 'ca.crt': both, 'tls.crt': server.certificate, 'tls.key': server.privateKey }),
    );
    secrets.set(
      SecretName.ControlPlaneTls,
      userSecret({ 'ca.crt': both, 'tls.crt': client.certificate, 'tls.key': client.privateKey }),
    );
    expect(names(planAt(secrets, T0)).filter((n) => n.startsWith('problem'))).toEqual([]);
  });

  it('reports an expired user certificate, and a leaf a user CA without its key cannot issue', () => {
    const ca = mintCa({ commonName: 'their CA', notBefore: T0, notAfter: at(3650) });
    const expired = mintLeaf(
      {
        commonName: 'polychrome-state',
        dnsNames: [`polychrome-state.${NS}.svc`],
        notBefore: T0,
        notAfter: at(30),
      },
      'server',
      ca,
    );
    const secrets: Secrets = new Map([
      [SecretName.StateCa, userSecret({ 'ca.crt': ca.certificate })],
      [
        SecretName.StateTls,
        userSecret({
          'ca.crt': ca.certificate,
          'tls.crt': expired.certificate,
          'tls.key': expired.privateKey,
        }),
      ],
    ]);
    const actions = planAt(secrets, at(31)).filter((a) => a.op === 'problem');
    expect(actions.map((a) => a.op === 'problem' && a.message)).toEqual([
      expect.stringMatching(/^polychrome-state-tls tls.crt expired on /),
      expect.stringMatching(
        /^polychrome-control-plane-tls is absent and polychrome-state-ca cannot issue it/,
      ),
    ]);
  });

  it('waits for what another issuer writes, and checks it once there', () => {
    const external = [
      SecretName.StateCa,
      SecretName.StateTls,
      SecretName.ControlPlaneTls,
      SecretName.HarnessCa,
    ];
    const secrets: Secrets = new Map();
    const passes = settle(secrets, T0, external);
    expect(names(passes.at(-1) ?? [])).toEqual([
      'wait polychrome-state-ca',
      'wait polychrome-harness-ca',
      'wait polychrome-state-tls',
      'wait polychrome-control-plane-tls',
    ]);
    expect([...secrets.keys()].sort()).toEqual(
      [SecretName.ApprovalKey, SecretName.SigningKey, SecretName.RecordsKey].sort(),
    );
    // cert-manager writes them: valid ones are taken as they are; a bad one is reported, never reissued.
    const ca = mintCa({ commonName: 'cert-manager CA', notBefore: T0, notAfter: at(3650) });
    const server = mintLeaf(
      {
        commonName: 'polychrome-state',
        dnsNames: [`polychrome-state.${NS}.svc`],
        notBefore: T0,
        notAfter: at(90),
      },
      'server',
      ca,
    );
    const client = mintLeaf(
      {
        commonName: 'polychrome-control-plane',
        organizations: ['polychrome:writer'],
        notBefore: T0,
        notAfter: at(90),
      },
      'both',
      ca,
    );
    const tls = (pair: { certificate: string; privateKey: string }): ObservedSecret =>
      userSecret({
        'ca.crt': ca.certificate,
        'tls.crt': pair.certificate,
        'tls.key': pair.privateKey,
      });
    secrets.set(SecretName.StateCa, tls(ca));
    secrets.set(SecretName.HarnessCa, tls(ca));
    secrets.set(SecretName.StateTls, tls(server));
    secrets.set(SecretName.ControlPlaneTls, tls(client));
    // Past two thirds of the leaves' 90 days: cert-manager's to renew, not the operator's.
    expect(names(planAt(secrets, at(80), external))).toEqual([
      'problem polychrome-control-plane-tls',
    ]);
  });

  it('refuses to make a new records key where the signing key shows an install already ran', () => {
    const secrets = installed();
    secrets.delete(SecretName.RecordsKey);
    expect(planAt(secrets, T0)).toEqual([
      {
        op: 'problem',
        name: SecretName.RecordsKey,
        message: expect.stringContaining('restore polychrome-state-records-key from your backup'),
      },
    ]);
  });
});
