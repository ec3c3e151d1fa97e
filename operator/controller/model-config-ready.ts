/**
 * A ModelConfig's Ready condition, from what reading its key Secret with the control
 * plane's own identity gave (docs/operator.md, "Agents and ModelConfigs"). Pure: the shell
 * reads the Secret and hands over only whether the key is there, never its value.
 */
import { ConditionStatus } from '../api/v1alpha1/conditions';
import type { SecretKeyRef } from '../api/v1alpha1/model-config-resource';
import { ModelConfigReason } from '../api/v1alpha1/resource-conditions';
import type { ReadyVerdict } from './ready-condition';

/** What a GET of the key Secret, as the control plane, gave. */
export type SecretLookup =
  | { readonly kind: 'found'; readonly hasKey: boolean }
  | { readonly kind: 'forbidden' }
  | { readonly kind: 'not_found' };

/** The control plane's ServiceAccount: the subject a namespace grants the Secret to. */
export interface ControlPlaneAccount {
  readonly name: string;
  readonly namespace: string;
}

/** What {@link modelConfigReady} decides from. */
export interface ModelConfigReadyInput {
  readonly namespace: string;
  readonly name: string;
  /** Absent: the ModelConfig needs no key. */
  readonly secretKeyRef?: SecretKeyRef;
  /** Absent exactly when secretKeyRef is. */
  readonly lookup?: SecretLookup;
  readonly account: ControlPlaneAccount;
}

/**
 * The Role and RoleBinding a namespace owner creates so the control plane may read one
 * Secret: `get` on that name only, nothing else in the namespace.
 */
export function secretGrantCommands(
  namespace: string,
  secretName: string,
  account: ControlPlaneAccount,
): string {
  const role = `polychrome-read-${secretName}`.slice(0, 253);
  return (
    `kubectl -n ${namespace} create role ${role} --verb=get --resource=secrets --resource-name=${secretName} && ` +
    `kubectl -n ${namespace} create rolebinding ${role} --role=${role} --serviceaccount=${account.namespace}:${account.name}`
  );
}

/** Ready True `Resolved`, or False with the reason the key cannot be used. */
export function modelConfigReady(input: ModelConfigReadyInput): ReadyVerdict {
  const { namespace, name, secretKeyRef: ref, lookup, account } = input;
  if (ref === undefined || lookup === undefined) {
    return {
      status: ConditionStatus.True,
      reason: ModelConfigReason.Resolved,
      message: 'no secretKeyRef: requests carry no API key',
    };
  }
  const secret = `Secret ${namespace}/${ref.name}`;
  switch (lookup.kind) {
    case 'forbidden':
      return {
        status: ConditionStatus.False,
        reason: ModelConfigReason.SecretForbidden,
        message:
          `the control plane (ServiceAccount ${account.namespace}/${account.name}) may not get ${secret}; ` +
          `a namespace admin grants it that one Secret with: ${secretGrantCommands(namespace, ref.name, account)}`,
      };
    case 'not_found':
      return {
        status: ConditionStatus.False,
        reason: ModelConfigReason.SecretNotFound,
        message: `${secret} does not exist: create it with the API key under key ${ref.key}, or fix spec.secretKeyRef of ModelConfig ${name}`,
      };
    case 'found':
      return lookup.hasKey
        ? {
            status: ConditionStatus.True,
            reason: ModelConfigReason.Resolved,
            message: `the API key is in ${secret}, key ${ref.key}`,
          }
        : {
            status: ConditionStatus.False,
            reason: ModelConfigReason.SecretKeyMissing,
            message: `${secret} has no key ${ref.key}, or it is empty: put the API key there, or fix spec.secretKeyRef.key of ModelConfig ${name}`,
          };
  }
}
