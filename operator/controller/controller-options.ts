/**
 * What `ConversationController` is given, and what it reports back through its hooks:
 * the controller's contract with operator/main.ts and the tests.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from './clock';
import type { EventWriteResult } from './event-recorder';
import type { ConversationKube } from './kube-client';
import type { JournalRetention } from '../api/v1alpha1/conversation-values';

/** Options of `ConversationController`. */
export interface ConversationControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  /** @default the wall clock */
  readonly clock?: Clock;
  /** Watch one namespace only (tests); @default every namespace */
  readonly namespace?: string;
  /** Concurrent passes (distinct keys). @default DEFAULT_WORKERS */
  readonly workers?: number;
  /** Watch SandboxClaims and Sandboxes (agent-sandbox installed). @default true */
  readonly agentSandbox?: boolean;
  /** Image of the built-in harness pod spec. @default DEFAULT_HARNESS_IMAGE */
  readonly harnessImage?: string;
  /**
   * Delay before looking again for a missing warm pool or template, which nothing
   * watches. @default BLOCKED_RECHECK_MS (30 s)
   */
  readonly blockedRecheckMs?: number;
  /** Every Conversation is queued again this often. @default 600_000 (10 min) */
  readonly resyncMs?: number;
  /** Backoff of failed passes. @default 100 ms doubling to 60 s */
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
  /**
   * How long a read of an object many Conversations share and nothing watches (a
   * PodTemplate, SandboxWarmPool or SandboxTemplate) is reused. Keep it below
   * `blockedRecheckMs`, so a recheck sees a fresh read. @default SHARED_READ_TTL_MS (10 s)
   */
  readonly sharedReadTtlMs?: number;
  /**
   * Replaces the cluster adapter (tests). @default reads from the informer caches, writes
   * through the API
   */
  readonly kube?: ConversationKube;
  /**
   * Decides whether this replica reconciles a Conversation now: with several replicas,
   * only the holder of the conversation's lease writes its children and status. A
   * Conversation that is not owned is queued again after `retryAfterMs`.
   * @default every Conversation is owned (one replica)
   */
  readonly ownership?: (ref: OwnedConversation) => Promise<Ownership>;
  /**
   * Runs when a deleted Conversation's children are gone, just before its finalizer comes
   * off: what the control plane keeps for it outside its namespace goes now (its Lease,
   * which no owner reference can garbage-collect across namespaces, and its journal as its
   * `spec.journalRetention` says). A failure fails the
   * pass, which is retried; the finalizer stays until it succeeds.
   * @default nothing
   */
  readonly beforeFinalizerRemoved?: (
    ref: OwnedConversation & { readonly journalRetention: JournalRetention | undefined },
  ) => Promise<void>;
  /**
   * Runs when the watch reports a Conversation gone from the API, on every replica: what
   * this replica may have made for it since its finalizer came off goes now (a Lease it
   * took while its cache still held the Conversation). A failure is logged; nothing
   * retries it.
   * @default nothing
   */
  readonly afterDeleted?: (ref: OwnedConversation) => Promise<void>;
  /** Called after every pass, for metrics. */
  readonly onPass?: (outcome: PassOutcome) => void;
  /**
   * Called with the namespace of every Conversation the watch delivers: the harness egress
   * policy goes where Conversations are (`harness-egress-controller.ts`). @default nothing
   */
  readonly onConversationNamespace?: (namespace: string) => void;
  /**
   * Kubernetes Events on Conversations (docs/operator.md, Events), or false for none.
   * @default recorded, `reportingInstance` the host name
   */
  readonly events?: ConversationEventOptions | false;
}

/** Options of the Events a `ConversationController` records. */
export interface ConversationEventOptions {
  /** `reportingInstance` of the Events: this replica's pod name. @default the host name */
  readonly reportingInstance?: string;
  /** Called after every Event write, for metrics. */
  readonly onWrite?: (result: EventWriteResult) => void;
}

/** The Conversation an {@link ConversationControllerOptions.ownership} check is about. */
export interface OwnedConversation {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

/** Whether this replica may reconcile a Conversation now. */
export type Ownership =
  { readonly owned: true } | { readonly owned: false; readonly retryAfterMs: number };

/** What one pass did, for metrics. */
export interface PassOutcome {
  readonly result: 'success' | 'error' | 'not_owned';
  readonly durationMs: number;
}

/** Concurrent passes when {@link ConversationControllerOptions.workers} is not set. */
export const DEFAULT_WORKERS = 2;
