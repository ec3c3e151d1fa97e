/**
 * The provisioner's pure core: from the Secrets that exist (whose they are, their content)
 * and the time, what to create, renew, or report (docs/operator.md, "Installing: what the
 * operator provisions"). A Secret without the provisioner's label is the user's: it is only
 * checked, never written. One pass may leave work for the next (a leaf waits for its CA to
 * be written); provisioner.ts runs passes until one writes nothing.
 */
import type { X509Certificate } from 'node:crypto';

import {
  CA_COMMON_NAMES,
  leafSpecs,
  renewAt,
  SecretName,
  type CaName,
  type LeafSpec,
  type Lifetimes,
} from './catalog';
import {
  ed25519Problem,
  inspectCa,
  inspectLeaf,
  recordsKeyProblem,
  signedBy,
  type CaContent,
  type LeafContent,
  type SecretData,
} from './inspect';

/** A Secret as read: whether it carries the provisioner's label, its version and data. */
export interface ObservedSecret {
  readonly owned: boolean;
  readonly resourceVersion: string;
  readonly data: SecretData;
}

/** Everything a pass decides from. */
export interface PlanInput {
  readonly namespace: string;
  readonly now: Date;
  readonly lifetimes: Lifetimes;
  /** Secrets another issuer writes (cert-manager): checked, waited for, never written. */
  readonly external: ReadonlySet<string>;
  /** The Secrets that exist, by name; an absent name does not exist. */
  readonly secrets: ReadonlyMap<string, ObservedSecret>;
}

/** A CA's signing pair, PEM. */
export interface Signer {
  readonly certificate: string;
  readonly privateKey: string;
}

/** What a written Secret holds; materials.ts makes the keys and certificates. */
export type Material =
  /** A new CA; `keep` are the PEMs of earlier CAs its trust bundle still holds. */
  | { readonly kind: 'ca'; readonly name: CaName; readonly keep: readonly string[] }
  | {
      readonly kind: 'leaf';
      readonly spec: LeafSpec;
      readonly signer: Signer;
      /** The CA's trust bundle, PEM, for `ca.crt`. */
      readonly bundle: string;
    }
  /** The same data with one key changed (a trust bundle refreshed). */
  | { readonly kind: 'data'; readonly data: Readonly<Record<string, string>> }
  | { readonly kind: 'signing-key' }
  | { readonly kind: 'approval-key' }
  | { readonly kind: 'records-key' };

/** One decision of a pass. */
export type Action =
  | {
      readonly op: 'create';
      readonly name: SecretName;
      readonly material: Material;
      readonly reason: string;
    }
  | {
      readonly op: 'replace';
      readonly name: SecretName;
      readonly resourceVersion: string;
      readonly material: Material;
      readonly reason: string;
    }
  /** Something the provisioner may not fix: a user's Secret is invalid. */
  | { readonly op: 'problem'; readonly name: SecretName; readonly message: string }
  /** An external issuer has not written the Secret yet. */
  | { readonly op: 'wait'; readonly name: SecretName; readonly message: string };

/** A CA as this pass sees it: usable content, being written this pass, or unusable. */
type CaState = CaContent | 'pending' | 'unusable';

const pemOf = (certificates: readonly X509Certificate[]): string =>
  certificates.map((c) => c.toString()).join('');

function userFix(name: string): string {
  return `fix or delete the Secret ${name} (a Secret without the label app.kubernetes.io/managed-by=polychrome is yours: the operator only checks it; delete it and the operator makes a new one)`;
}

function planCa(input: PlanInput, name: CaName, needed: boolean, out: Action[]): CaState {
  const secret = input.secrets.get(name);
  const external = input.external.has(name);
  if (secret === undefined) {
    if (external) {
      out.push({ op: 'wait', name, message: `waiting for ${name}, which another issuer writes` });
      return 'unusable';
    }
    if (!needed) return 'unusable';
    out.push({ op: 'create', name, material: { kind: 'ca', name, keep: [] }, reason: 'absent' });
    return 'pending';
  }
  const content = inspectCa(secret.data, input.now, secret.owned && needed);
  if (!secret.owned || external) {
    if (typeof content !== 'string') return content;
    out.push({ op: 'problem', name, message: `${name} ${content}: ${userFix(name)}` });
    return 'unusable';
  }
  const replace = (material: Material, reason: string): CaState => {
    out.push({ op: 'replace', name, resourceVersion: secret.resourceVersion, material, reason });
    return 'pending';
  };
  if (typeof content === 'string') return replace({ kind: 'ca', name, keep: [] }, content);
  const signer = content.signerCertificate;
  if (
    signer !== undefined &&
    input.now >= renewAt(new Date(signer.validFrom), new Date(signer.validTo))
  ) {
    const keep = content.bundle
      .filter((c) => input.now < new Date(c.validTo))
      .map((c) => c.toString());
    return replace({ kind: 'ca', name, keep }, `due for renewal (valid until ${signer.validTo})`);
  }
  const current = content.bundle.filter((c) => input.now < new Date(c.validTo));
  if (current.length < content.bundle.length) {
    const data = { ...textOf(secret.data), 'ca.crt': pemOf(current) };
    return replace({ kind: 'data', data }, 'its trust bundle holds an expired CA');
  }
  return content;
}

function textOf(data: SecretData): Record<string, string> {
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.toString('utf8')]));
}

/** The leaf Secret `spec` names: created, renewed or checked against its CA. */
function planLeaf(
  input: PlanInput,
  spec: LeafSpec,
  ca: CaState,
  out: Action[],
): LeafContent | undefined {
  const { name } = spec;
  const secret = input.secrets.get(name);
  const signer = typeof ca === 'string' ? undefined : ca.signer;
  const issue = (reason: string, resourceVersion?: string): undefined => {
    if (ca === 'pending') return undefined;
    if (signer === undefined || typeof ca === 'string') {
      out.push({
        op: 'problem',
        name,
        message: `${name} is ${reason} and ${spec.ca} cannot issue it (it holds no usable CA key): create ${name} yourself, or let the operator own ${spec.ca} (delete it)`,
      });
      return undefined;
    }
    const material: Material = { kind: 'leaf', spec, signer, bundle: pemOf(ca.bundle) };
    out.push(
      resourceVersion === undefined
        ? { op: 'create', name, material, reason }
        : { op: 'replace', name, resourceVersion, material, reason },
    );
    return undefined;
  };
  if (secret === undefined) {
    if (!input.external.has(name)) return issue('absent');
    out.push({ op: 'wait', name, message: `waiting for ${name}, which another issuer writes` });
    return undefined;
  }
  const content = inspectLeaf(secret.data, spec, input.now);
  if (!secret.owned || input.external.has(name)) {
    if (typeof content !== 'string') return content;
    out.push({ op: 'problem', name, message: `${name} ${content}: ${userFix(name)}` });
    return undefined;
  }
  if (typeof content === 'string') return issue(`invalid (${content})`, secret.resourceVersion);
  const signerCertificate = typeof ca === 'string' ? undefined : ca.signerCertificate;
  if (signerCertificate !== undefined && !signedBy(content.certificate, signerCertificate)) {
    return issue(`signed by an earlier CA than ${spec.ca}'s`, secret.resourceVersion);
  }
  const { certificate } = content;
  if (input.now >= renewAt(new Date(certificate.validFrom), new Date(certificate.validTo))) {
    return issue(`due for renewal (valid until ${certificate.validTo})`, secret.resourceVersion);
  }
  if (typeof ca !== 'string' && pemOf(content.bundle) !== pemOf(ca.bundle)) {
    const data = { ...textOf(secret.data), 'ca.crt': pemOf(ca.bundle) };
    out.push({
      op: 'replace',
      name,
      resourceVersion: secret.resourceVersion,
      material: { kind: 'data', data },
      reason: `its ca.crt differs from ${spec.ca}'s trust bundle`,
    });
  }
  return content;
}

/** The two sides of the state plane's mTLS must trust each other's issuer. */
function planTrust(server: LeafContent, client: LeafContent, out: Action[]): void {
  const check = (a: LeafContent, aName: SecretName, b: LeafContent, bName: SecretName): void => {
    if (!b.bundle.some((ca) => signedBy(a.certificate, ca))) {
      out.push({
        op: 'problem',
        name: aName,
        message: `${aName}'s tls.crt is not signed by a CA in ${bName}'s ca.crt, so the other side refuses it: issue both from one CA, or put both CAs into both ca.crt`,
      });
    }
  };
  check(server, SecretName.StateTls, client, SecretName.ControlPlaneTls);
  check(client, SecretName.ControlPlaneTls, server, SecretName.StateTls);
}

function planKey(
  input: PlanInput,
  name: SecretName,
  material: Material,
  problem: (data: SecretData) => string | undefined,
  out: Action[],
): void {
  const secret = input.secrets.get(name);
  if (secret === undefined) {
    if (input.external.has(name)) {
      out.push({ op: 'wait', name, message: `waiting for ${name}, which another issuer writes` });
    } else if (name === SecretName.RecordsKey && input.secrets.has(SecretName.SigningKey)) {
      out.push({
        op: 'problem',
        name,
        message: `${name} is missing but ${SecretName.SigningKey} exists, so this is not a first install and stored credentials were sealed with a key that is gone: restore ${name} from your backup (key records-key); only if there is none, create it with 64 new random hex digits, and stored credentials stay unreadable`,
      });
    } else {
      out.push({ op: 'create', name, material, reason: 'absent' });
    }
    return;
  }
  const found = problem(secret.data);
  // Keys are never replaced, not even the operator's own: a new one would orphan what the old one signed or sealed.
  if (found !== undefined) {
    out.push({
      op: 'problem',
      name,
      message: `${name} ${found}: restore it from your backup, or ${secret.owned ? 'delete it to have a new one made' : userFix(name)}`,
    });
  }
}

/** Every action of one pass, CAs first. */
export function plan(input: PlanInput): Action[] {
  const out: Action[] = [];
  const leaves = leafSpecs(input.namespace);
  const issuesFrom = (ca: CaName): boolean =>
    leaves.some(
      (l) =>
        l.ca === ca && !input.external.has(l.name) && (input.secrets.get(l.name)?.owned ?? true),
    );
  const cas = new Map<CaName, CaState>();
  for (const name of Object.keys(CA_COMMON_NAMES) as CaName[]) {
    // The control plane mounts the harness CA's ca.crt: it is always needed.
    cas.set(name, planCa(input, name, name === SecretName.HarnessCa || issuesFrom(name), out));
  }
  const contents = leaves.map((spec) => planLeaf(input, spec, cas.get(spec.ca) ?? 'unusable', out));
  const [server, client] = contents;
  if (server !== undefined && client !== undefined) planTrust(server, client, out);
  planKey(
    input,
    SecretName.SigningKey,
    { kind: 'signing-key' },
    (d) => ed25519Problem(d, 'signing-key'),
    out,
  );
  planKey(input, SecretName.RecordsKey, { kind: 'records-key' }, recordsKeyProblem, out);
  planKey(
    input,
    SecretName.ApprovalKey,
    { kind: 'approval-key' },
    (d) => ed25519Problem(d, 'key.pem'),
    out,
  );
  return out;
}
