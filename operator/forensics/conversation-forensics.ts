/**
 * The admin's forensic operations on a conversation (docs/replay.md, "Commands"): the
 * journal's export, read by the control plane from the state plane with its own client, in
 * the file format of `polychrome state export`, with the checkpoint and the journal keys
 * the Conversation's status keeps outside the journal; and repair, the state plane's `Repair` fenced with the
 * conversation's lease, taken as a turn takes it, so a repair never races a turn.
 */
import { partitionOf } from '../../common/partition-name';
import { AppError } from '../../common/errors';
import {
  exportFileLines,
  type ExportApprovalKey,
  type ExportCheckpoint,
  type ExportSourceEntry,
} from '../../common/journal-export-format';
import { journalKeyFromJson, type JournalPublicKey } from '../../common/journal-keys';
import type {
  EraseOutcome,
  HeadOutcome,
  JournalEntry,
  RepairOutcome,
} from '../../common/state-journal';
import type { StateCallOptions } from '../../common/state-calls';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { LeaseHandle } from '../lease/lease-source';
import type { Caller } from '../turns/turn-service';
import { ForensicAction, forensicRefusal } from '../turns/forensic-access';
import { foldJournal } from '../turns/journal-view';
import { checkErasable } from './erasure-check';

/** What forensics reads and writes of the state plane (StateClient in production). */
export interface ForensicJournal {
  head(partition: string, options?: StateCallOptions): Promise<HeadOutcome>;
  export(
    partition: string,
    options?: Pick<StateCallOptions, 'signal'>,
  ): AsyncIterable<ExportSourceEntry>;
  repair(
    partition: string,
    request: {
      readonly actor: string;
      readonly reason: string;
      readonly dryRun?: boolean;
      readonly fencingToken?: number;
    },
    options?: StateCallOptions,
  ): Promise<RepairOutcome>;
  // ---- erasure (docs/state-plane.md, "Erasure") ----
  read(
    partition: string,
    fromPosition?: number,
    limit?: number,
    options?: Pick<StateCallOptions, 'signal'>,
  ): AsyncIterable<JournalEntry>;
  erase(
    partition: string,
    request: {
      readonly positions: readonly number[];
      readonly actor: string;
      readonly reason: string;
      readonly dryRun?: boolean;
      readonly fencingToken?: number;
    },
    options?: StateCallOptions,
  ): Promise<EraseOutcome>;
}

/**
 * How a repair holds the conversation: the turn coordinator's claim (this replica's lock
 * and the conversation's Lease), after which its cached journal view is dropped, since the
 * repair wrote the journal behind it.
 */
export interface ConversationHolder {
  exclusive<T>(
    conversation: Conversation,
    signal: AbortSignal,
    work: (lease: Pick<LeaseHandle, 'fencingToken'>) => Promise<T>,
  ): Promise<T>;
}

export interface ConversationForensicsOptions {
  readonly journal: ForensicJournal;
  readonly conversations: { byUid(uid: string): Conversation | undefined };
  readonly holder: ConversationHolder;
  /**
   * The key the control plane signs approvals with (operator/turns/approval-signer.ts),
   * put in every export's header so replay can check the recorded approval answers.
   * Absent: exports carry none (replay then needs `--approval-key`).
   */
  readonly approvalKey?: ExportApprovalKey;
}

/** An export as the API answers it. */
export interface ConversationExport {
  /** The Conversation's `status.journal` (the checkpoint kept outside the journal), if any. */
  readonly checkpoint: ExportCheckpoint | undefined;
  /** The journal keys the Conversation's status records (`status.journal.publicKeys`). */
  readonly publicKeys: readonly JournalPublicKey[];
  /** The export file's lines, each with its newline; the first is read before this resolves. */
  readonly lines: AsyncIterable<string>;
}

/** A repair's answer (`RepairResult` in docs/api/openapi.json). */
export interface RepairAnswer {
  readonly conversationId: string;
  readonly actor: string;
  readonly dryRun: boolean;
  readonly excised: readonly {
    readonly position: number;
    readonly leafDigestHex: string;
    readonly problem: string;
  }[];
  readonly head: number;
  readonly message: string;
}

/** An erasure's request, as the API takes it (`EraseRequest` in docs/api/openapi.json). */
export interface EraseRequest {
  readonly actor: string;
  readonly positions: readonly number[];
  readonly reason: string;
  readonly dryRun: boolean;
}

/** An erasure's answer (`EraseResult` in docs/api/openapi.json). */
export interface EraseAnswer {
  readonly conversationId: string;
  readonly actor: string;
  readonly dryRun: boolean;
  readonly erased: readonly {
    readonly position: number;
    readonly kind: string;
    readonly turnId: string;
    readonly leafDigestHex: string;
  }[];
  readonly head: number;
  readonly message: string;
}

const ROOT_HEX = /^[0-9a-f]{64}$/u;

/**
 * The checkpoint of a Conversation's `status.journal`, when it names a head and a root.
 * Pure.
 */
export function statusCheckpoint(conversation: Conversation): ExportCheckpoint | undefined {
  const journal = conversation.status?.journal;
  const head = journal?.head;
  const root = journal?.lastSignedRoot;
  if (head === undefined || head < 1 || root === undefined || !ROOT_HEX.test(root)) {
    return undefined;
  }
  return {
    head,
    root: new Uint8Array(Buffer.from(root, 'hex')),
    ...(journal?.keyId === undefined || journal.keyId === '' ? {} : { keyId: journal.keyId }),
  };
}

/** The `X-Polychrome-Checkpoint` value: `N:ROOTHEX[:KEYID]`, as `--checkpoint` takes it. */
export function checkpointHeader(checkpoint: ExportCheckpoint): string {
  return (
    `${String(checkpoint.head)}:${Buffer.from(checkpoint.root).toString('hex')}` +
    (checkpoint.keyId === undefined ? '' : `:${checkpoint.keyId}`)
  );
}

/**
 * The journal keys of a Conversation's `status.journal.publicKeys`, in order. A damaged
 * entry is left out: a verifier pinning the rest then fails closed (`wrong_key`). Pure.
 */
export function statusJournalKeys(conversation: Conversation): readonly JournalPublicKey[] {
  const keys: JournalPublicKey[] = [];
  for (const json of conversation.status?.journal?.publicKeys ?? []) {
    const key = journalKeyFromJson(json);
    if (typeof key !== 'string') keys.push(key);
  }
  return keys;
}

/**
 * The `X-Polychrome-Public-Keys` value: the keys, base64, comma-separated, as
 * `--public-key` takes each.
 */
export function publicKeysHeader(keys: readonly JournalPublicKey[]): string {
  return keys.map((k) => Buffer.from(k.publicKey).toString('base64')).join(',');
}

export class ConversationForensics {
  constructor(private readonly options: ConversationForensicsOptions) {}

  /**
   * The conversation's export. The state plane's own checkpoint (its head when the export
   * began) goes in the file's header, as `state export` writes it, with the control
   * plane's approval public key; the Conversation's status checkpoint is returned beside it.
   *
   * @throws AppError `not_found`, `permission_denied` (operator/turns/forensic-access.ts); the state
   *   plane's errors before the first line (`unavailable`, ...).
   */
  async export(
    caller: Caller,
    conversationId: string,
    actor: string,
    signal: AbortSignal,
  ): Promise<ConversationExport> {
    const conversation = this.allowed(caller, conversationId, ForensicAction.Export, actor);
    // Read before the export starts, so the export holds at least it.
    const checkpoint = statusCheckpoint(conversation);
    const publicKeys = statusJournalKeys(conversation);
    const partition = partitionOf(conversationId);
    const head = await this.options.journal.head(partition, { signal });
    const claimed: ExportCheckpoint | undefined =
      head.signedRoot === undefined
        ? undefined
        : { head: head.head, root: head.signedRoot.root, keyId: head.signedRoot.keyId };
    const iterator = exportFileLines(
      partition,
      this.options.journal.export(partition, { signal }),
      { checkpoint: claimed, approvalKey: this.options.approvalKey },
    )[Symbol.asyncIterator]();
    // The first line (the header, after the keys) is read here, so an error of the state
    // plane is still an error answer, not a cut stream.
    const first = await iterator.next();
    async function* lines(): AsyncGenerator<string> {
      if (first.done === true) return;
      yield first.value;
      for (;;) {
        const next = await iterator.next();
        if (next.done === true) return;
        yield next.value;
      }
    }
    return { checkpoint, publicKeys, lines: lines() };
  }

  /**
   * Excises every unreadable entry of the conversation's journal (`dryRun`: reports them,
   * writes nothing), holding the conversation as a turn does; the excision events record
   * `actor`.
   *
   * @throws AppError `not_found`, `permission_denied`; `unavailable` when another replica
   *   holds the conversation (details.forwardTo) or the state plane fenced the write; the
   *   state plane's `data_loss` when the damage is beyond entries.
   */
  async repair(
    caller: Caller,
    conversationId: string,
    request: { readonly actor: string; readonly dryRun: boolean },
    signal: AbortSignal,
  ): Promise<RepairAnswer> {
    const conversation = this.allowed(caller, conversationId, ForensicAction.Repair, request.actor);
    const outcome = await this.options.holder.exclusive(conversation, signal, (lease) =>
      this.options.journal.repair(
        partitionOf(conversationId),
        {
          actor: request.actor,
          reason: `repair of conversation ${conversationId} through the control plane, asked by ${caller.identity}`,
          dryRun: request.dryRun,
          fencingToken: lease.fencingToken,
        },
        { signal },
      ),
    );
    return {
      conversationId,
      actor: request.actor,
      dryRun: outcome.dryRun,
      excised: outcome.excised.map((e) => ({
        position: e.position,
        leafDigestHex: Buffer.from(e.leafDigest).toString('hex'),
        problem: e.problem,
      })),
      head: outcome.head,
      message: outcome.message,
    };
  }

  /**
   * Erases the content of the named entries of the conversation's journal (`dryRun`:
   * checks, writes nothing), holding the conversation as a turn does: each must belong to
   * a settled turn, or to none (erasure-check.ts), and the state plane checks the rest; the
   * signed records name `actor` and `reason`.
   *
   * @throws AppError `not_found`, `permission_denied`; `failed_precondition` naming each
   *   position that may not be erased; as {@link ConversationForensics.repair}.
   */
  async erase(
    caller: Caller,
    conversationId: string,
    request: EraseRequest,
    signal: AbortSignal,
  ): Promise<EraseAnswer> {
    const conversation = this.allowed(caller, conversationId, ForensicAction.Erase, request.actor);
    const partition = partitionOf(conversationId);
    const { journal } = this.options;
    const outcome = await this.options.holder.exclusive(conversation, signal, async (lease) => {
      const entries: JournalEntry[] = [];
      for await (const entry of journal.read(partition, 0, 0, { signal })) entries.push(entry);
      checkErasable(conversationId, foldJournal(entries), request.positions);
      const { positions, actor, reason, dryRun } = request;
      const fencingToken = lease.fencingToken;
      return journal.erase(
        partition,
        { positions, actor, reason, dryRun, fencingToken },
        { signal },
      );
    });
    return {
      conversationId,
      actor: request.actor,
      dryRun: outcome.dryRun,
      erased: outcome.erased.map((e) => ({
        position: e.position,
        kind: e.kind,
        turnId: e.turnId,
        leafDigestHex: Buffer.from(e.leafDigest).toString('hex'),
      })),
      head: outcome.head,
      message: outcome.message,
    };
  }

  private allowed(
    caller: Caller,
    conversationId: string,
    action: ForensicAction,
    actor: string,
  ): Conversation {
    const conversation = this.options.conversations.byUid(conversationId);
    const refusal = forensicRefusal(caller, conversationId, conversation, action, actor);
    if (refusal !== undefined) throw refusal;
    if (conversation === undefined) throw new AppError('not_found', 'unreachable');
    return conversation;
  }
}
