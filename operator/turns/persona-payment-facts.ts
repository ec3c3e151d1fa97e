/**
 * The shell between a paid call and the state plane's persona payment records
 * (docs/payments.md, "A persona's wallet and limits"): it reads the policy of the persona a
 * turn is attributed to with what that persona spent in the policy's period, for the pure
 * rule (effective-payment.ts), and counts a payment against the persona before its
 * `payment_sent` is committed, so a crash between the two over-counts (fails closed) and
 * never under-counts.
 */
import { isAppError } from '../../common/errors';
import type { PersonaSpendCap } from '../../common/persona-payment-calls';
import type { RecordsClient } from '../../common/records-client';
import type { PaymentCharge } from '../../proto/gen/polychrome/events/v1/events';
import type { PersonaPayment } from './effective-payment';
import { parseSpendLimits } from './spend-limits-input';

/** The records calls the persona payments make (the control plane's RecordsClient). */
export type PersonaPaymentStore = Pick<
  RecordsClient,
  'getPersonaPaymentPolicy' | 'setPersonaPaymentPolicy' | 'recordPersonaSpend' | 'listPersonaSpends'
>;

/**
 * The payment policy of `personaId` in force with the payments counted against it in its
 * period (or every one, when its limits cannot be read: the rule then refuses anyway);
 * undefined when there is no store, no persona, or no policy.
 *
 * @throws StateCallError when the records cannot be read: no charge is decided then.
 */
export async function personaPaymentOf(
  store: PersonaPaymentStore | undefined,
  personaId: string,
  nowMs: number,
): Promise<PersonaPayment | undefined> {
  if (store === undefined || personaId === '') return undefined;
  const { current } = await store.getPersonaPaymentPolicy(personaId);
  if (current === undefined || (current.wallet === '' && current.limitsJson === '')) {
    return undefined;
  }
  const spends =
    current.limitsJson === ''
      ? []
      : await store.listPersonaSpends(personaId, sinceOf(current.limitsJson, nowMs));
  return {
    personaId,
    wallet: current.wallet,
    limitsJson: current.limitsJson,
    spent: spends.map(({ network, asset, amount, atMs, idempotencyKey }) => ({
      ...{ network, asset, amount, idempotencyKey },
      at: new Date(atMs).toISOString(),
    })),
  };
}

/** The start of the limits' period at `nowMs` (0, every payment, for unreadable limits). */
function sinceOf(limitsJson: string, nowMs: number): number {
  try {
    return Math.max(0, nowMs - parseSpendLimits(limitsJson).limits.periodSeconds * 1000);
  } catch {
    return 0;
  }
}

/**
 * Counts `charge` against `personaId` (once per idempotency key) before it is sent. With
 * the persona's limits (`persona`, as the plan read them), the records refuse the count in
 * the same step when it would pass the persona's period cap on the charge's asset, so two
 * conversations of the persona sending at once cannot both pass it: the refusal, as text,
 * is returned then, and nothing is sent.
 *
 * @throws StateCallError when the records cannot be reached or refuse otherwise: nothing is
 *   sent then.
 */
export async function countPersonaSpend(
  store: PersonaPaymentStore | undefined,
  personaId: string,
  charge: PaymentCharge,
  conversationId: string,
  atMs: number,
  persona: PersonaPayment | undefined,
): Promise<string | undefined> {
  if (store === undefined || personaId === '') return undefined;
  const { idempotencyKey, network, asset, amount } = charge;
  const cap =
    persona?.personaId === personaId ? capOf(persona.limitsJson, charge, atMs) : undefined;
  try {
    await store.recordPersonaSpend(
      { ...{ personaId, idempotencyKey, conversationId }, ...{ network, asset, amount, atMs } },
      cap,
    );
    return undefined;
  } catch (error) {
    if (
      isAppError(error) &&
      error.code === 'failed_precondition' &&
      error.details.limit !== undefined
    ) {
      return `persona ${personaId}'s spend limit max_per_period: ${error.message}`;
    }
    throw error;
  }
}

/** The persona's cap on the charge's asset per period, from its limits; undefined: none. */
function capOf(
  limitsJson: string,
  charge: PaymentCharge,
  atMs: number,
): PersonaSpendCap | undefined {
  if (limitsJson === '') return undefined;
  try {
    const { limits } = parseSpendLimits(limitsJson);
    const asset = limits.assets.find(
      (a) => a.network === charge.network && a.asset.toLowerCase() === charge.asset.toLowerCase(),
    );
    return asset === undefined
      ? undefined
      : {
          maxPerPeriod: asset.maxPerPeriod,
          sinceMs: Math.max(0, atMs - limits.periodSeconds * 1000),
        };
  } catch {
    // Unreadable limits allow nothing: the plan refused before this is reached.
    return undefined;
  }
}
