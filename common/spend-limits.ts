/**
 * Spend limits (docs/payments.md, "Spend limits"): a pure rule deciding whether a charge
 * may even be shown for approval. Deny by default: a network, asset or payee not listed
 * is refused, and limits past their expiry allow nothing. Amounts compare as integers of
 * base units, per asset (amounts of different assets are never added).
 */
export interface SpendLimits {
  /** The networks payments may use (CAIP-2). */
  readonly networks: readonly string[];
  /** Each asset that may be paid, with its caps. */
  readonly assets: readonly AssetLimit[];
  /** The payees that may be paid (addresses), or "any". */
  readonly payees: readonly string[] | 'any';
  /** The length of the rolling window `maxPerPeriod` counts over, in seconds. */
  readonly periodSeconds: number;
  /** When these limits stop allowing anything (ISO 8601), if they expire. */
  readonly expiresAt?: string;
}

/**
 * What the limits read of a charge (operator/payments/charge.ts `Charge` has these fields,
 * as does a committed `payment_charge`).
 */
export interface SpendCharge {
  /** Base units of the asset, decimal digits. */
  readonly amount: string;
  readonly asset: string;
  /** CAIP-2. */
  readonly network: string;
  readonly payee: string;
  /** When the charge stops being payable (ISO 8601). */
  readonly expiresAt: string;
}

/** The caps on one asset: per payment and per period, in base units (decimal strings). */
export interface AssetLimit {
  readonly network: string;
  readonly asset: string;
  readonly maxPerPayment: string;
  readonly maxPerPeriod: string;
}

/**
 * A payment that counts against the limits: every payment approved for sending, settled
 * or with an unknown outcome (the turn layer derives them from the journal). Only a
 * payment known not to have moved money is left out.
 */
export interface PriorPayment {
  readonly network: string;
  readonly asset: string;
  readonly amount: string;
  /** When it was approved (ISO 8601). */
  readonly at: string;
}

/** The limit a refusal names. */
export const SpendLimit = {
  Invalid: 'invalid_limits',
  Expired: 'limits_expired',
  ChargeExpired: 'charge_expired',
  Network: 'network',
  Asset: 'asset',
  Payee: 'payee',
  PerPayment: 'max_per_payment',
  PerPeriod: 'max_per_period',
} as const;
export type SpendLimit = (typeof SpendLimit)[keyof typeof SpendLimit];

export type SpendDecision =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly limit: SpendLimit; readonly message: string };

const refuse = (limit: SpendLimit, message: string): SpendDecision => ({
  allowed: false,
  limit,
  message,
});
const isAmount = (value: string): boolean => /^[0-9]{1,78}$/.test(value);
const same = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** Decides a charge against the limits and the payments already counted. */
export function checkSpendLimits(
  limits: SpendLimits,
  charge: SpendCharge,
  prior: readonly PriorPayment[],
  now: Date,
): SpendDecision {
  const broken = limits.assets.find((a) => !isAmount(a.maxPerPayment) || !isAmount(a.maxPerPeriod));
  if (broken !== undefined || !(limits.periodSeconds > 0)) {
    return refuse(
      SpendLimit.Invalid,
      'the spend limits are malformed (an amount that is not whole base units, or no period); nothing is allowed until they are fixed',
    );
  }
  if (limits.expiresAt !== undefined && now.getTime() >= Date.parse(limits.expiresAt)) {
    return refuse(
      SpendLimit.Expired,
      `the spend limits expired at ${limits.expiresAt}; no payment is allowed until they are renewed`,
    );
  }
  if (now.getTime() >= Date.parse(charge.expiresAt)) {
    return refuse(SpendLimit.ChargeExpired, `the charge expired at ${charge.expiresAt}`);
  }
  if (!limits.networks.includes(charge.network)) {
    return refuse(
      SpendLimit.Network,
      `network ${charge.network} is not among the allowed networks`,
    );
  }
  const asset = limits.assets.find(
    (a) => a.network === charge.network && same(a.asset, charge.asset),
  );
  if (asset === undefined) {
    return refuse(
      SpendLimit.Asset,
      `asset ${charge.asset} on ${charge.network} is not among the allowed assets`,
    );
  }
  if (limits.payees !== 'any' && !limits.payees.some((p) => same(p, charge.payee))) {
    return refuse(SpendLimit.Payee, `payee ${charge.payee} is not among the allowed payees`);
  }
  const amount = BigInt(charge.amount);
  if (amount > BigInt(asset.maxPerPayment)) {
    return refuse(
      SpendLimit.PerPayment,
      `${charge.amount} is over the limit of ${asset.maxPerPayment} per payment of ${charge.asset}`,
    );
  }
  const since = now.getTime() - limits.periodSeconds * 1000;
  const spent = prior
    .filter(
      (p) =>
        p.network === charge.network && same(p.asset, charge.asset) && Date.parse(p.at) > since,
    )
    .reduce((sum, p) => sum + BigInt(p.amount), 0n);
  if (spent + amount > BigInt(asset.maxPerPeriod)) {
    return refuse(
      SpendLimit.PerPeriod,
      `${charge.amount} on top of ${spent} already spent in the last ${limits.periodSeconds} s is over the limit of ${asset.maxPerPeriod} of ${charge.asset}`,
    );
  }
  return { allowed: true };
}

/**
 * Reads the limits a `payment_policy` records (`limits_json`: the canonical JSON the control
 * plane wrote from the admin's limits, docs/payments.md "Linking a wallet") back into
 * `SpendLimits`, for an audit of the journal. Only the shape is read here: the values are
 * judged by {@link checkSpendLimits} itself, which allows nothing under malformed caps.
 * Returns what is wrong, as text, when the shape is not the limits'.
 */
export function readRecordedLimits(limitsJson: string): SpendLimits | string {
  let value: unknown;
  try {
    value = JSON.parse(limitsJson);
  } catch {
    return 'the recorded limits are not JSON';
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return 'the recorded limits are not a JSON object';
  }
  const { networks, assets, payees, periodSeconds, expiresAt } = value as Record<string, unknown>;
  if (!isStrings(networks)) return 'the recorded limits have no list of networks';
  if (!Array.isArray(assets) || !assets.every(isAssetLimit)) {
    return 'the recorded limits have no list of assets with network, asset, maxPerPayment and maxPerPeriod';
  }
  if (payees !== 'any' && !isStrings(payees)) return 'the recorded limits name no payees';
  if (typeof periodSeconds !== 'number') return 'the recorded limits have no periodSeconds';
  if (expiresAt !== undefined && typeof expiresAt !== 'string') {
    return 'the recorded limits have an expiresAt that is not text';
  }
  return {
    networks,
    assets,
    payees,
    periodSeconds,
    ...(expiresAt === undefined ? {} : { expiresAt }),
  };
}

const isStrings = (value: unknown): value is string[] =>
  Array.isArray(value) && value.every((v) => typeof v === 'string');

function isAssetLimit(value: unknown): value is AssetLimit {
  if (typeof value !== 'object' || value === null) return false;
  const asset = value as Record<string, unknown>;
  return ['network', 'asset', 'maxPerPayment', 'maxPerPeriod'].every(
    (field) => typeof asset[field] === 'string',
  );
}
