/**
 * The onboarding decision for one namespace, without I/O (docs/operator.md, "Conversation
 * namespaces"): from the Namespace's labels, the objects of our names found in it and the
 * provisioner's Secrets, what to create, apply, issue, delete, or refuse. onboarder.ts reads
 * and writes; nothing here does.
 *
 * The rules:
 * - Labelled `polychrome.dev/enabled=true`: every object of `ONBOARDED_REFS` is made when
 *   absent and put back when ours differs from what we would write. The harness certificate
 *   is reissued when it is not valid for the namespace, not signed by the harness CA's
 *   current key, or two thirds through its life; the approval public key follows the
 *   provisioner's.
 * - Not labelled so (no label, another value, or the Namespace is being deleted): every
 *   object of ours is deleted, with the uid read as a precondition (not the resourceVersion:
 *   agent-sandbox keeps writing the warm pool's status, and a delete must not lose to that).
 * - An object of one of our names without our label is someone else's: it is named in a
 *   `conflict` and never written, adopted or deleted.
 */
import { ONBOARDING_LABEL } from '../api/v1alpha1/conversation-values';
import type { X509Certificate } from 'node:crypto';

import type { Lifetimes } from '../provision/catalog';
import { renewAt } from '../provision/catalog';
import { inspectCa, inspectLeaf, signedBy, type SecretData } from '../provision/inspect';
import {
  BUNDLE_OBJECTS,
  CredentialSecret,
  ONBOARDED_LABEL,
  ONBOARDED_REFS,
  describeRef,
  harnessLeafRequirements,
  refKey,
  type ObjectRef,
} from './catalog';
import {
  desiredBundleObject,
  harnessSecret,
  holds,
  refOf,
  type Manifest,
  type Placement,
} from './desired';

/** An object of one of our names, as read from the namespace. */
export interface ObservedObject {
  /** It carries our label (`ONBOARDED_LABEL`). */
  readonly owned: boolean;
  readonly uid: string;
  readonly resourceVersion: string;
  /** It has a deletionTimestamp. */
  readonly deleting: boolean;
  /** The object as read (wire JSON). */
  readonly body: unknown;
}

/** The provisioner's Secrets in the control plane's namespace; undefined when absent. */
export interface CredentialSources {
  readonly harnessCa: SecretData | undefined;
  readonly approvalKey: SecretData | undefined;
}

/** Everything one decision is made from. */
export interface OnboardingInput {
  readonly namespace: {
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly deleting: boolean;
  };
  readonly placement: Placement;
  readonly sources: CredentialSources;
  /** By `refKey`; a ref missing here is absent from the namespace. */
  readonly observed: ReadonlyMap<string, ObservedObject>;
  readonly now: Date;
  readonly lifetimes: Lifetimes;
}

/** What to issue the harness certificate from: the CA's pair and the bundle to ship. */
export interface IssueFrom {
  readonly signer: { readonly certificate: string; readonly privateKey: string };
  readonly bundle: string;
}

/** One step of a decision. `resourceVersion` set: the write is a precondition on it. */
export type OnboardingAction =
  | { readonly op: 'create'; readonly ref: ObjectRef; readonly object: Manifest }
  | {
      readonly op: 'apply';
      readonly ref: ObjectRef;
      readonly object: Manifest;
      readonly resourceVersion: string;
      /**
       * The object as read. The shell writes only what the server keeps of `object`, and
       * nothing when this already holds that (`keptBy`, desired.ts).
       */
      readonly stored: unknown;
    }
  | {
      readonly op: 'issue';
      readonly ref: ObjectRef;
      readonly from: IssueFrom;
      readonly reason: string;
      /** undefined: create; else replace ours at that version. */
      readonly resourceVersion: string | undefined;
    }
  | { readonly op: 'delete'; readonly ref: ObjectRef; readonly uid: string }
  | {
      readonly op: 'conflict';
      readonly ref: ObjectRef;
      /** The uid of the object that is not ours. */
      readonly uid: string;
      readonly message: string;
    }
  | { readonly op: 'wait'; readonly ref: ObjectRef; readonly message: string };

/** True when the Namespace asks to be onboarded. */
export function wantsOnboarding(labels: Readonly<Record<string, string>>): boolean {
  return labels[ONBOARDING_LABEL.key] === ONBOARDING_LABEL.value;
}

/** The decision for one namespace. */
export function planOnboarding(input: OnboardingInput): OnboardingAction[] {
  const { namespace, observed } = input;
  if (!wantsOnboarding(namespace.labels) || namespace.deleting) {
    return ONBOARDED_REFS.flatMap((ref): OnboardingAction[] => {
      const found = observed.get(refKey(ref));
      if (found === undefined || !found.owned || found.deleting) return [];
      return [{ op: 'delete', ref, uid: found.uid }];
    });
  }
  return [
    ...planHarnessSecret(input),
    ...planHarnessTls(input),
    ...BUNDLE_OBJECTS.flatMap((o) =>
      planObject(input, desiredBundleObject(o, namespace.name, input.placement)),
    ),
  ];
}

/** The message of an object of our name that is not ours. */
function conflictMessage(namespace: string, ref: ObjectRef): string {
  return (
    `namespace ${namespace} has ${describeRef(ref)}, which onboarding did not create (it lacks ` +
    `the label ${ONBOARDED_LABEL.key}=${ONBOARDED_LABEL.value}), so it is left as it is and ` +
    `not replaced: delete it to have the operator install its own, or add that label to hand ` +
    `it over, or remove the label ${ONBOARDING_LABEL.key} from the namespace to keep managing ` +
    `its sandbox objects by hand`
  );
}

/**
 * The common part: absent → create; someone else's → conflict; ours, being deleted → wait;
 * ours → `decideOwned`.
 */
function planRef(
  input: OnboardingInput,
  ref: ObjectRef,
  create: () => OnboardingAction,
  decideOwned: (found: ObservedObject) => OnboardingAction[],
): OnboardingAction[] {
  const found = input.observed.get(refKey(ref));
  if (found === undefined) return [create()];
  if (!found.owned) {
    const message = conflictMessage(input.namespace.name, ref);
    return [{ op: 'conflict', ref, uid: found.uid, message }];
  }
  if (found.deleting) {
    return [
      {
        op: 'wait',
        ref,
        message: `${describeRef(ref)} is being deleted; made again once it is gone`,
      },
    ];
  }
  return decideOwned(found);
}

/** An object whose whole content we render: created, or applied when ours differs. */
function planObject(input: OnboardingInput, object: Manifest): OnboardingAction[] {
  const ref = refOf(object);
  return planRef(
    input,
    ref,
    () => ({ op: 'create', ref, object }),
    (found) =>
      holds(found.body, object)
        ? []
        : [
            {
              op: 'apply',
              ref,
              object,
              resourceVersion: found.resourceVersion,
              stored: found.body,
            },
          ],
  );
}

const HEX_KEY = /^[0-9a-f]{64}$/;

/** `polychrome-harness`: the approval public key, copied from polychrome-approval-key. */
function planHarnessSecret(input: OnboardingInput): OnboardingAction[] {
  const ref: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: CredentialSecret.Harness };
  const source = input.sources.approvalKey;
  const cp = input.placement.controlPlaneNamespace;
  const key = source?.['public-key']?.toString('utf8').trim().toLowerCase();
  if (key === undefined || !HEX_KEY.test(key)) {
    const why =
      source === undefined
        ? `the Secret polychrome-approval-key is not in namespace ${cp} yet (the provisioner makes it)`
        : `public-key of the Secret polychrome-approval-key in namespace ${cp} is not 64 hex digits`;
    return [{ op: 'wait', ref, message: `${describeRef(ref)} waits: ${why}` }];
  }
  return planObject(input, harnessSecret(input.namespace.name, key));
}

/** `polychrome-harness-tls`: the namespace's certificate from the harness CA's current key. */
function planHarnessTls(input: OnboardingInput): OnboardingAction[] {
  const ref: ObjectRef = { apiVersion: 'v1', kind: 'Secret', name: CredentialSecret.HarnessTls };
  const { now, sources, namespace } = input;
  const cp = input.placement.controlPlaneNamespace;
  const ca =
    sources.harnessCa === undefined
      ? `the Secret polychrome-harness-ca is not in namespace ${cp} yet (the provisioner makes it)`
      : inspectCa(sources.harnessCa, now, true);
  if (typeof ca === 'string' || ca.signer === undefined || ca.signerCertificate === undefined) {
    const why = typeof ca === 'string' ? ca : 'polychrome-harness-ca has no key to issue from';
    return [{ op: 'wait', ref, message: `${describeRef(ref)} waits: ${why}` }];
  }
  const from: IssueFrom = {
    signer: ca.signer,
    bundle: sources.harnessCa?.['ca.crt']?.toString('utf8') ?? '',
  };
  const signer = ca.signerCertificate;
  return planRef(
    input,
    ref,
    () => ({ op: 'issue', ref, from, reason: 'absent', resourceVersion: undefined }),
    (found) => {
      const reason = leafReason(found, namespace.name, signer, now);
      return reason === undefined
        ? []
        : [{ op: 'issue', ref, from, reason, resourceVersion: found.resourceVersion }];
    },
  );
}

/** Why our stored certificate must be reissued, or undefined when it is current. */
function leafReason(
  found: ObservedObject,
  namespace: string,
  signer: X509Certificate,
  now: Date,
): string | undefined {
  const data = secretData(found.body);
  const leaf = inspectLeaf(data, harnessLeafRequirements(namespace), now);
  if (typeof leaf === 'string') return leaf;
  if (!signedBy(leaf.certificate, signer)) return 'not signed by the harness CA in use';
  const due = renewAt(new Date(leaf.certificate.validFrom), new Date(leaf.certificate.validTo));
  if (now >= due) return `due for renewal since ${due.toISOString()}`;
  return undefined;
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}

/** A Secret's `data`, decoded. */
export function secretData(body: unknown): SecretData {
  const data = record(record(body)['data']);
  return Object.fromEntries(
    Object.entries(data)
      .filter((e): e is [string, string] => typeof e[1] === 'string')
      .map(([k, v]) => [k, Buffer.from(v, 'base64')]),
  );
}
