/**
 * Learns the state plane's journal signing keys a Conversation's status records
 * (`status.journal.publicKeys`; the rule is common/journal-keys.ts). Runs off the turn's
 * path, before a status write: a batch signed by a recorded key costs nothing; the first
 * record of a journal reads its first batch and the state plane's keys once; a batch
 * signed by another key reads the events since the last recorded head for the
 * `key_rotated` that hands over to it.
 */
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import type { Logger } from 'pino';

import { decodePayload, EventKind } from '../../common/event-kinds';
import {
  chainJournalKeys,
  journalKeyId,
  JOURNAL_PUBLIC_KEY_BYTES,
  type Ed25519Check,
  type JournalPublicKey,
  type KeyRotationRecord,
} from '../../common/journal-keys';
import type { ExportEntry, JournalEntry } from '../../common/state-journal';
import type { StateCallOptions } from '../../common/state-calls';

/** What key learning reads of the state plane (StateClient in production). */
export interface JournalKeySource {
  read(
    partition: string,
    fromPosition?: number,
    limit?: number,
    options?: Pick<StateCallOptions, 'signal'>,
  ): AsyncIterable<JournalEntry>;
  export(partition: string, options?: Pick<StateCallOptions, 'signal'>): AsyncIterable<ExportEntry>;
}

/** Where the status's journal stands, and the batch that moved it. */
export interface KeyLearningRequest {
  readonly partition: string;
  /** The keys the status records now (empty: none yet). */
  readonly recorded: readonly JournalPublicKey[];
  /** The head the status recorded them at (0 when none). */
  readonly recordedHead: number;
  /** The new head, and the key id of the root that closed it. */
  readonly head: number;
  readonly keyId: string;
  readonly signal?: AbortSignal;
}

export class JournalKeyRecorder {
  constructor(
    private readonly options: {
      readonly state: JournalKeySource;
      readonly logger: Logger;
      /** @default ed25519 of node:crypto */
      readonly verify?: Ed25519Check;
    },
  ) {}

  /**
   * The keys the status should record after the batch. Unchanged when the batch's key is
   * recorded. A key that no recorded key handed over to is not added (logged as an error:
   * the state plane signs with a key this conversation never saw introduced).
   *
   * @throws the state plane's errors (the caller keeps the recorded keys).
   */
  async keysAfter(request: KeyLearningRequest): Promise<readonly JournalPublicKey[]> {
    const { partition, keyId, signal } = request;
    if (request.recorded.some((k) => k.keyId === keyId)) return request.recorded;
    const options = signal === undefined ? {} : { signal };
    let recorded = request.recorded;
    let from = request.recordedHead;
    if (recorded.length === 0) {
      const first = await this.firstRootKeyId(partition, options);
      if (first === undefined) return [];
      const key = await this.stateKey(partition, first, options);
      if (key === undefined) {
        this.options.logger.warn(
          { partition, keyId: first },
          'the state plane no longer holds the key of the journal first root; no key recorded',
        );
        return [];
      }
      recorded = [key];
      from = 0;
      if (first === keyId) return recorded;
    }
    const verify = this.options.verify ?? nodeEd25519Check;
    let chained = chainJournalKeys(
      recorded,
      await this.rotations(partition, from, request.head, options),
      verify,
    );
    const first = recorded[0];
    if (!chained.keys.some((k) => k.keyId === keyId) && from > 0 && first !== undefined) {
      // The hand-over may lie before the recorded head (learning failed when it was
      // written): rebuild the chain from the first key over the whole journal, in order.
      chained = chainJournalKeys(
        [first],
        await this.rotations(partition, 0, request.head, options),
        verify,
      );
    }
    for (const refusal of chained.refused) {
      this.options.logger.error(
        { partition, position: refusal.position, reason: refusal.reason },
        'a key_rotated event does not hand over from a recorded key; its key is not recorded',
      );
    }
    if (!chained.keys.some((k) => k.keyId === keyId)) {
      this.options.logger.error(
        { partition, keyId, recorded: chained.keys.map((k) => k.keyId) },
        'the journal is signed by a key no recorded key handed over to; it is not recorded',
      );
    }
    return chained.keys;
  }

  /** The `key_rotated` events in positions [from, head). */
  private async rotations(
    partition: string,
    from: number,
    head: number,
    options: Pick<StateCallOptions, 'signal'>,
  ): Promise<KeyRotationRecord[]> {
    const rotations: KeyRotationRecord[] = [];
    if (head <= from) return rotations;
    for await (const entry of this.options.state.read(partition, from, head - from, options)) {
      if (entry.kind !== EventKind.KeyRotated || entry.excised === true) continue;
      const rotated = decodePayload(EventKind.KeyRotated, entry.payload);
      rotations.push({
        position: entry.position,
        oldKeyId: rotated.oldKeyId,
        newKeyId: rotated.newKeyId,
        newPublicKey: new Uint8Array(rotated.newPublicKey),
        signatureByOldKey: new Uint8Array(rotated.signatureByOldKey),
      });
    }
    return rotations;
  }

  /** The key id of the partition's first `signed_root` (its first batch ends with it). */
  private async firstRootKeyId(
    partition: string,
    options: Pick<StateCallOptions, 'signal'>,
  ): Promise<string | undefined> {
    for await (const entry of this.options.state.read(partition, 0, 0, options)) {
      if (entry.kind === EventKind.SignedRoot && entry.excised !== true) {
        return decodePayload(EventKind.SignedRoot, entry.payload).keyId;
      }
    }
    return undefined;
  }

  /** The state plane's public key with id `keyId`, from the key items that open an export. */
  private async stateKey(
    partition: string,
    keyId: string,
    options: Pick<StateCallOptions, 'signal'>,
  ): Promise<JournalPublicKey | undefined> {
    for await (const item of this.options.state.export(partition, options)) {
      // Keys come first; leaving at the first event cancels the stream.
      if (item.type !== 'public_key') break;
      if (
        item.keyId === keyId &&
        item.publicKey.length === JOURNAL_PUBLIC_KEY_BYTES &&
        journalKeyId(item.publicKey) === keyId
      ) {
        return { keyId, publicKey: item.publicKey.slice() };
      }
    }
    return undefined;
  }
}

/** ed25519 through node:crypto (OpenSSL: RFC 8032 strict, as the verifiers). */
export const nodeEd25519Check: Ed25519Check = (publicKey, message, signature) => {
  let key: KeyObject;
  try {
    key = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKey).toString('base64url') },
      format: 'jwk',
    });
  } catch {
    return false;
  }
  return verify(null, message, key, signature);
};
