import type { Metadata } from '@grpc/grpc-js';
import { AppError } from '../../common/errors';
import {
  credentialRefused,
  HARNESS_CREDENTIAL_METADATA,
  verifyHarnessCredential,
  type CredentialVerifier,
} from '../../common/harness-credential';

/**
 * A harness serves exactly one conversation (docs/operator.md, "The harness door"). It
 * binds to the conversation of the first call with a valid credential (or to the one its
 * pod was started for) and from then on refuses every call whose credential names another
 * conversation, and every turn whose `start` names another conversation than its
 * credential. The credential is checked and dropped: it is never logged or kept.
 */
export interface ConversationBindingOptions {
  /** The control plane's public keys (raw 32 bytes): the current one and, in a rotation, the next. */
  readonly publicKeys: readonly Uint8Array[];
  readonly verifier: CredentialVerifier;
  readonly nowMs: () => number;
  /** The conversation uid the pod was started for (the pod backend); absent: the first valid call's. */
  readonly conversation?: string;
  /** The pod's own namespace (downward API): a credential for another is refused. */
  readonly namespace: string;
}

export type Admission =
  | { readonly ok: true; readonly conversation: string }
  | { readonly ok: false; readonly error: AppError };

export class ConversationBinding {
  private bound: string | undefined;

  constructor(private readonly options: ConversationBindingOptions) {
    this.bound = options.conversation === '' ? undefined : options.conversation;
  }

  /** The conversation this harness serves, once bound. */
  conversation(): string | undefined {
    return this.bound;
  }

  /** Checks the call's credential; binds the harness on the first valid one. */
  admit(metadata: Metadata): Admission {
    const values = metadata.get(HARNESS_CREDENTIAL_METADATA);
    const [value] = values;
    if (values.length !== 1 || typeof value !== 'string') {
      return refuse(credentialRefused('the call carries none (or more than one)'));
    }
    const verdict = verifyHarnessCredential(
      value,
      this.options.publicKeys,
      this.options.verifier,
      this.options.nowMs(),
    );
    if (!verdict.ok) return refuse(credentialRefused(verdict.reason));
    const { conversation, namespace } = verdict.claims;
    const own = this.options.namespace;
    if (namespace !== own) {
      return refuse(
        new AppError(
          'permission_denied',
          `this harness runs in namespace ${own} and refuses a credential for conversation ${conversation} of namespace ${namespace}; send the turn to a harness of namespace ${namespace}`,
          { details: { namespace: own, requested: namespace } },
        ),
      );
    }
    this.bound ??= conversation;
    if (conversation !== this.bound) return refuse(boundElsewhere(this.bound, conversation));
    return { ok: true, conversation };
  }
}

/** The error for a turn whose `start` names another conversation than its credential. */
export function startMismatch(credential: string, start: string): AppError {
  return new AppError(
    'permission_denied',
    `the call's credential is for conversation ${credential}, but its start names conversation ${start}; a credential runs turns of its own conversation only`,
    { details: { conversation: credential, requested: start } },
  );
}

function boundElsewhere(bound: string, requested: string): AppError {
  return new AppError(
    'permission_denied',
    `this harness serves conversation ${bound} only and refuses conversation ${requested}; send the turn to the harness of conversation ${requested}`,
    { details: { conversation: bound, requested } },
  );
}

function refuse(error: AppError): Admission {
  return { ok: false, error };
}
