import type {
  ListPersonaSpendsResponse,
  PersonaPaymentPolicy,
  PersonaPaymentPolicyResponse,
  PersonaSpend,
  RecordPersonaSpendResponse,
} from '../proto/gen/polychrome/state/v1/records';
import type { RecordsConnection } from './records-connection';
import type { StateCallOptions } from './state-calls';

/*
 * The persona payment calls of the Records service (RecordsClient's persona payment
 * methods; docs/payments.md, "A persona's wallet and limits"). The records' shapes are the
 * wire's, copied so that no caller holds a proto message.
 */

/** One change of a persona's payment policy, as the records keep it. */
export interface PersonaPaymentPolicyRecord {
  readonly personaId: string;
  /** A wallet name, or '' for none. */
  readonly wallet: string;
  /** Canonical JSON of the spend limits, or '' for none. */
  readonly limitsJson: string;
  readonly setBy: string;
  readonly session: string;
  readonly reason: string;
  readonly setAtMs: number;
  /** 1 for the first change, then +1. */
  readonly sequence: number;
}

/** The policy in force (absent: never set) and every change, oldest first. */
export interface PersonaPaymentPolicies {
  readonly current: PersonaPaymentPolicyRecord | undefined;
  readonly history: readonly PersonaPaymentPolicyRecord[];
}

/** A change to record; `expectedSequence` is the `sequence` of the policy read (0: none). */
export type NewPersonaPaymentPolicy = Omit<PersonaPaymentPolicyRecord, 'setAtMs' | 'sequence'> & {
  readonly expectedSequence: number;
};

/** A payment counted against a persona's period totals. */
export interface PersonaSpendRecord {
  readonly personaId: string;
  readonly idempotencyKey: string;
  readonly conversationId: string;
  readonly network: string;
  readonly asset: string;
  /** Base units, decimal digits. */
  readonly amount: string;
  readonly atMs: number;
}

const policyOf = (p: PersonaPaymentPolicy): PersonaPaymentPolicyRecord => ({ ...p });
const policiesOf = (response: PersonaPaymentPolicyResponse): PersonaPaymentPolicies => ({
  current: response.current === undefined ? undefined : policyOf(response.current),
  history: response.history.map(policyOf),
});
const spendOf = (s: PersonaSpend): PersonaSpendRecord => ({ ...s });

/**
 * Appends a change of the persona's payment policy.
 *
 * @throws StateCallError `invalid_argument`, `not_found`, `conflict` (a stale
 *   `expectedSequence`; `details.sequence`).
 */
export async function setPersonaPaymentPolicy(
  connection: RecordsConnection,
  input: NewPersonaPaymentPolicy,
  options: StateCallOptions = {},
): Promise<PersonaPaymentPolicies> {
  const response = await connection.unary<PersonaPaymentPolicyResponse>(
    'SetPersonaPaymentPolicy',
    options,
    (m, o, done) => connection.grpc.setPersonaPaymentPolicy({ ...input }, m, o, done),
  );
  return policiesOf(response);
}

/**
 * The persona's payment policy in force and its history.
 *
 * @throws StateCallError `invalid_argument`, `not_found`.
 */
export async function getPersonaPaymentPolicy(
  connection: RecordsConnection,
  personaId: string,
  options: StateCallOptions = {},
): Promise<PersonaPaymentPolicies> {
  const response = await connection.unary<PersonaPaymentPolicyResponse>(
    'GetPersonaPaymentPolicy',
    options,
    (m, o, done) => connection.grpc.getPersonaPaymentPolicy({ personaId }, m, o, done),
  );
  return policiesOf(response);
}

/** The persona's period cap on the payment's network and asset, checked as it is counted. */
export interface PersonaSpendCap {
  /** Base units, decimal digits. */
  readonly maxPerPeriod: string;
  /** The period's start: payments counted at or after it add up. */
  readonly sinceMs: number;
}

/**
 * Counts a payment against the persona, once per idempotency key; `recorded` is false for
 * a repeat (the first record is returned). With `cap`, refuses a payment that would pass it
 * in the same step as it counts, so two sends at once cannot both pass.
 *
 * @throws StateCallError `invalid_argument`, `not_found`, `failed_precondition` (over the
 *   cap; `details.limit` "max_per_period").
 */
export async function recordPersonaSpend(
  connection: RecordsConnection,
  spend: PersonaSpendRecord,
  cap: PersonaSpendCap | undefined,
  options: StateCallOptions = {},
): Promise<{ spend: PersonaSpendRecord; recorded: boolean }> {
  const request = {
    spend: { ...spend },
    periodSinceMs: cap?.sinceMs ?? 0,
    ...(cap === undefined ? {} : { maxPerPeriod: cap.maxPerPeriod }),
  };
  const response = await connection.unary<RecordPersonaSpendResponse>(
    'RecordPersonaSpend',
    options,
    (m, o, done) => connection.grpc.recordPersonaSpend(request, m, o, done),
  );
  const recorded = connection.required(response.spend, 'RecordPersonaSpend');
  return { spend: spendOf(recorded), recorded: response.recorded };
}

/**
 * The payments counted against the persona at or after `sinceMs`, oldest first.
 *
 * @throws StateCallError `invalid_argument`.
 */
export async function listPersonaSpends(
  connection: RecordsConnection,
  personaId: string,
  sinceMs: number,
  options: StateCallOptions = {},
): Promise<PersonaSpendRecord[]> {
  const response = await connection.unary<ListPersonaSpendsResponse>(
    'ListPersonaSpends',
    options,
    (m, o, done) => connection.grpc.listPersonaSpends({ personaId, sinceMs }, m, o, done),
  );
  return response.spends.map(spendOf);
}
