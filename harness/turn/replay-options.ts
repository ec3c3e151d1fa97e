import type { RequestIds } from '../../common/request-ids';
import type { RequestHasher } from './agent-config';
import type { SignatureVerifier } from './approval-token';
import type { TurnAgent } from './turn-agents';
import type { TurnInput } from './turn-machine';
import type { TurnStep } from './turn-records';

/** What replay needs besides the journal. */
export interface ReplayOptions {
  readonly ids: RequestIds;
  readonly verifier: SignatureVerifier;
  /**
   * The control plane's approval public key (raw 32 bytes). Without it a turn with an
   * approval answer cannot be checked and is reported `unverifiable`.
   */
  readonly approvalPublicKey?: Uint8Array;
  /**
   * How request digests are computed; default: the digest of docs/replay.md
   * (`createPrefixRequestHasher`). What-if hashes under the recorded configuration digest.
   */
  readonly requestHasher?: RequestHasher;
  /**
   * Told each attempt's rebuilt input before it is replayed (`--live` starts a scratch
   * run from it, harness/turn/live.ts). Must not throw.
   */
  readonly onAttempt?: (attempt: ReplayAttempt) => void;
  /**
   * Agents every attempt may also hand its turn to, besides those it recorded (what-if's
   * changed handoff target, whose configuration another turn recorded). Replay itself
   * gives none: an attempt is given exactly the agents it committed.
   */
  readonly otherAgents?: readonly TurnAgent[];
}

/** An attempt as replay rebuilt it from the journal. */
export interface ReplayAttempt {
  readonly turnId: string;
  readonly dispatchPosition: number;
  /** The machine's input: the steps and answers recorded before the dispatch. */
  readonly input: TurnInput;
  /** The steps the attempt itself recorded, with their positions, in journal order. */
  readonly steps: readonly { readonly position: number; readonly step: TurnStep }[];
}
