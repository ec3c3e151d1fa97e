import { AppError } from '../../common/errors';
import type { RecordContext } from './record-context';
import { checkIdentity, checkRecordId, quoteValue } from './record-input';
import { personaIndexKey, personaIndexPrefix, Tag } from './record-keys';
import type { PersonaRecords } from './persona-records';
import {
  idSchema,
  personaPaymentPolicySchema,
  personaSpendSchema,
  type StoredPersonaPaymentPolicy,
  type StoredPersonaSpend,
} from './record-schemas';
import { decodeValue, encodeValue } from './record-values';

/*
 * A persona's payment records (docs/payments.md, "A persona's wallet and limits"): the
 * history of its payment policy, and the payments counted against its period totals. The
 * control plane decides who may set a policy and checks its limits; the records keep what it
 * decided, append-only, and count each payment once per idempotency key.
 */

/** The longest limits text kept, in characters. */
export const MAX_LIMITS_JSON_LENGTH = 16_384;
/** The longest reason kept, in characters. */
export const MAX_POLICY_REASON_LENGTH = 4096;

/** A change of a persona's payment policy, as the control plane asks for it. */
export interface NewPersonaPaymentPolicy {
  readonly personaId: string;
  /** A wallet name, or '' for none. */
  readonly wallet: string;
  /** Canonical JSON of the spend limits, or '' for none. */
  readonly limitsJson: string;
  readonly setBy: string;
  readonly session: string;
  readonly reason: string;
  /** The sequence of the policy the caller read; 0 when it read none. */
  readonly expectedSequence: number;
}

/** A period cap checked in the same step as a count: the payments since `sinceMs` plus it. */
export interface SpendCap {
  /** Base units, decimal digits. */
  readonly maxPerPeriod: string;
  readonly sinceMs: number;
}

/** The policy in force (the newest change) and every change, oldest first. */
export interface PersonaPaymentPolicies {
  readonly current: StoredPersonaPaymentPolicy | undefined;
  readonly history: readonly StoredPersonaPaymentPolicy[];
}

const WALLET = /^(?:[a-z0-9](?:[a-z0-9-]{0,44}[a-z0-9])?)?$/;
const IDEMPOTENCY_KEY = /^[0-9a-f]{64}$/;
const AMOUNT = /^[0-9]{1,78}$/;
const MAX_TEXT = 256;
const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/** Payment policies and counted payments of personas; every change under the single writer. */
export class PersonaPayments {
  constructor(
    private readonly ctx: RecordContext,
    private readonly personas: PersonaRecords,
  ) {}

  /**
   * Appends a change of the persona's payment policy.
   *
   * @throws AppError `invalid_argument` (the field at fault); `not_found`; `conflict`
   *   (details: `sequence`) when `expectedSequence` is not the newest change's.
   */
  async setPolicy(input: NewPersonaPaymentPolicy): Promise<PersonaPaymentPolicies> {
    const personaId = checkRecordId(input.personaId, 'persona');
    checkField(WALLET.test(input.wallet), 'wallet', 'is not a wallet name (a DNS label) or ""');
    checkField(
      input.limitsJson.length <= MAX_LIMITS_JSON_LENGTH &&
        (input.wallet === '' || input.limitsJson !== ''),
      'limitsJson',
      `is over ${String(MAX_LIMITS_JSON_LENGTH)} characters, or missing for a wallet`,
    );
    const reason = input.reason.trim();
    checkField(
      reason !== '' && reason.length <= MAX_POLICY_REASON_LENGTH,
      'reason',
      `is required, at most ${String(MAX_POLICY_REASON_LENGTH)} characters`,
    );
    const setBy = checkIdentity(input.setBy);
    checkField(input.session.length <= MAX_TEXT, 'session', 'is too long');
    return this.ctx.db.exclusive(async () => {
      await this.personas.load(personaId);
      const history = await this.history(personaId);
      const sequence = history.at(-1)?.sequence ?? 0;
      if (input.expectedSequence !== sequence) {
        throw new AppError(
          'conflict',
          `persona ${personaId}'s payment policy is at change ${String(sequence)}, not ${String(input.expectedSequence)}: read it again`,
          { details: { record: 'persona', personaId, sequence } },
        );
      }
      const next: StoredPersonaPaymentPolicy = {
        personaId,
        wallet: input.wallet,
        limitsJson: input.limitsJson,
        setBy,
        session: input.session,
        reason,
        setAtMs: this.ctx.nowMs(),
        sequence: sequence + 1,
      };
      const key = personaIndexKey(Tag.PersonaPaymentPolicy, personaId, pad(next.sequence, 10));
      await this.ctx.db.write([{ type: 'put', key, value: encodeValue(next) }]);
      return { current: next, history: [...history, next] };
    });
  }

  /**
   * The persona's payment policy in force and its history.
   *
   * @throws AppError `invalid_argument`; `not_found`; `data_loss`.
   */
  async policy(personaId: string): Promise<PersonaPaymentPolicies> {
    const id = checkRecordId(personaId, 'persona');
    await this.personas.load(id);
    const history = await this.history(id);
    return { current: history.at(-1), history };
  }

  /**
   * Counts a payment against the persona, once per idempotency key: a repeat (a retry
   * after a crash between this and the `payment_sent`) returns the first record.
   *
   * @throws AppError `invalid_argument` (the field at fault); `not_found`.
   */
  async recordSpend(
    spend: StoredPersonaSpend,
    cap?: SpendCap,
  ): Promise<{ spend: StoredPersonaSpend; recorded: boolean }> {
    const personaId = checkRecordId(spend.personaId, 'persona');
    checkField(
      IDEMPOTENCY_KEY.test(spend.idempotencyKey),
      'idempotencyKey',
      'is not 64 hex digits',
    );
    checkField(AMOUNT.test(spend.amount), 'amount', 'is not whole base units');
    for (const field of ['conversationId', 'network', 'asset'] as const) {
      checkField(spend[field] !== '' && spend[field].length <= MAX_TEXT, field, 'is required');
    }
    if (cap !== undefined)
      checkField(AMOUNT.test(cap.maxPerPeriod), 'maxPerPeriod', 'is not whole base units');
    const atMs = spend.atMs > 0 ? spend.atMs : this.ctx.nowMs();
    return this.ctx.db.exclusive(async () => {
      await this.personas.load(personaId);
      const indexKey = personaIndexKey(Tag.PersonaSpendKey, personaId, spend.idempotencyKey);
      const existing = await this.ctx.db.get(indexKey);
      if (existing !== undefined) {
        const key = decodeValue(idSchema, existing, indexKey);
        const text = await this.ctx.db.get(key);
        if (text === undefined) throw brokenIndex(indexKey);
        return { spend: decodeValue(personaSpendSchema, text, key), recorded: false };
      }
      if (cap !== undefined) await this.refuseOverCap(spend, cap);
      const stored: StoredPersonaSpend = { ...spend, personaId, atMs };
      const key = personaIndexKey(
        Tag.PersonaSpend,
        personaId,
        `${pad(atMs, 15)}/${spend.idempotencyKey}`,
      );
      await this.ctx.db.write([
        { type: 'put', key, value: encodeValue(stored) },
        { type: 'put', key: indexKey, value: encodeValue(key) },
      ]);
      return { spend: stored, recorded: true };
    });
  }

  /**
   * The payments counted against the persona at or after `sinceMs`, oldest first.
   *
   * @throws AppError `invalid_argument`; `data_loss`.
   */
  async spends(personaId: string, sinceMs: number): Promise<StoredPersonaSpend[]> {
    const id = checkRecordId(personaId, 'persona');
    const prefix = personaIndexPrefix(Tag.PersonaSpend, id);
    // Keys sort by time: start just before the first millisecond counted.
    const after = sinceMs > 0 ? pad(sinceMs - 1, 15) + '/~' : undefined;
    const entries = await this.ctx.db.scan(prefix, after === undefined ? {} : { after });
    return entries.map(([key, value]) => decodeValue(personaSpendSchema, value, key));
  }

  /** Refuses `spend` when it and the same network and asset's counted payments pass the cap. */
  private async refuseOverCap(spend: StoredPersonaSpend, cap: SpendCap): Promise<void> {
    const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
    const counted = (await this.spends(spend.personaId, cap.sinceMs))
      .filter((s) => s.network === spend.network && same(s.asset, spend.asset))
      .reduce((sum, s) => sum + BigInt(s.amount), 0n);
    if (counted + BigInt(spend.amount) <= BigInt(cap.maxPerPeriod)) return;
    throw new AppError(
      'failed_precondition',
      `${spend.amount} on top of ${String(counted)} already counted against persona ${spend.personaId} is over its limit of ${cap.maxPerPeriod} of ${spend.asset} per period; nothing was counted`,
      { details: { record: 'persona', limit: 'max_per_period', counted: String(counted) } },
    );
  }

  private async history(personaId: string): Promise<StoredPersonaPaymentPolicy[]> {
    const entries = await this.ctx.db.scan(personaIndexPrefix(Tag.PersonaPaymentPolicy, personaId));
    return entries.map(([key, value]) => decodeValue(personaPaymentPolicySchema, value, key));
  }
}

function checkField(ok: boolean, field: string, rule: string): void {
  if (ok) return;
  throw new AppError('invalid_argument', `persona payment ${field} ${rule}`, {
    details: { record: 'persona', field },
  });
}

function brokenIndex(key: string): AppError {
  return new AppError('data_loss', `the persona spend index ${quoteValue(key)} names no record`, {
    details: { record: 'persona', key },
  });
}
