/**
 * The fold's input (journal-view.ts, lazy-view.ts): one journal event as decoded-event.ts
 * checked and interpreted it.
 */
import type { MemoryEvent } from '../../common/memory';
import type { MessageReceived } from '../../proto/gen/polychrome/events/v1/events';
import type { ErasedRef } from './erased-entries';
import type {
  AgentConfigRef,
  AgentRosterRef,
  LostCheckpoint,
  PaymentPolicyRef,
  SpentPayment,
  SignedRootRef,
  SummaryRecord,
  TurnView,
} from './journal-view-types';

/** Kinds whose payload names a turn (`turn_id`), besides `message_received`. */
export type TurnEventKind = RecordKind | RequestKind | PaymentKind | 'turn_resolved';

/** A paid call's events (docs/payments.md, "A paid call in a turn"). */
export type PaymentKind = 'payment_charge' | 'payment_sent' | 'outbound_payment_receipt';

/** Turn events that add to the turn's own record: directive, dispatch, steps, terminal. */
export type RecordKind =
  | 'ingress_directive'
  | 'turn_dispatched'
  | 'model_call'
  | 'tool_call'
  | 'tool_result'
  | 'agent_handoff'
  | 'handoff'
  | 'turn_complete'
  | 'turn_ambiguous';

/** Turn events about a request: the request, its answer, its cancel, its expiry. */
export type RequestKind =
  | 'approval_request'
  | 'approval_response'
  | 'question_request'
  | 'question_response'
  | 'request_cancelled'
  | 'approval_expired';

/** One checked, decoded event, ready to fold into a state. */
export type DecodedEvent =
  | {
      readonly type: 'message';
      readonly position: number;
      readonly message: MessageReceived;
      /** An erased message (erased-entries.ts): it opens its turn, and holds no key. */
      readonly erased?: true;
    }
  /** A sealed erasure record: the erased content leaves its turn (erased-entries.ts). */
  | { readonly type: 'erasure'; readonly erased: ErasedRef }
  | { readonly type: 'root'; readonly root: SignedRootRef }
  | { readonly type: 'config'; readonly config: AgentConfigRef }
  | { readonly type: 'roster'; readonly roster: AgentRosterRef }
  | { readonly type: 'summary'; readonly summary: SummaryRecord }
  /** A `memory_set` or `memory_cleared` (memory-fold.ts). */
  | { readonly type: 'memory'; readonly event: MemoryEvent }
  /** A sealed `rollback_accepted`: the checkpoint an admin accepted as lost. */
  | { readonly type: 'rollback_accepted'; readonly lost: LostCheckpoint }
  | {
      readonly type: 'turn';
      readonly position: number;
      readonly kind: TurnEventKind;
      readonly turnId: string;
      /** The decoded payload, as the turn's standing reads it (common/turn-standing.ts). */
      readonly payload: unknown;
      /** The turn's record with this event added. */
      readonly apply: (turn: TurnView) => TurnView;
      /** A `payment_sent`: what now counts against the spend limits (docs/payments.md). */
      readonly spent?: SpentPayment;
    }
  /** A sealed `payment_policy`: the wallet and limits in force from here on. */
  | { readonly type: 'payment_policy'; readonly policy: PaymentPolicyRef }
  | { readonly type: 'ignored' };
