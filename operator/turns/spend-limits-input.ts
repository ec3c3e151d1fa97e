/**
 * Spend limits as an admin writes them (docs/payments.md, "Linking a wallet"), read into
 * `SpendLimits` and refused with the field at fault for anything `checkSpendLimits` would
 * treat as malformed or that could not mean what the admin meant. Pure.
 *
 * Addresses are kept lower-case, so the same limits always have the same canonical JSON
 * (the journal records that text, and a change that changes nothing is refused by it).
 */
import { canonicalJson } from '../../common/canonical-json';
import { AppError } from '../../common/errors';
import { amountProblem, clip, isEvmAddress, isEvmNetwork } from '../payments/charge';
import type { AssetLimit, SpendLimits } from '../../common/spend-limits';

/** The longest limits text read, in characters. */
export const MAX_LIMITS_LENGTH = 16_384;

const LIMIT_FIELDS = new Set(['networks', 'assets', 'payees', 'periodSeconds', 'expiresAt']);
const ASSET_FIELDS = new Set(['network', 'asset', 'maxPerPayment', 'maxPerPeriod']);
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/u;

/** Spend limits read, and their canonical JSON as the journal records it. */
export interface ParsedLimits {
  readonly limits: SpendLimits;
  readonly canonical: string;
}

/**
 * Reads spend limits from a JSON value (an object; or its text, as the journal keeps it).
 *
 * @throws AppError `invalid_argument` whose `details.field` names the part at fault
 *   (`limits.assets[1].maxPerPeriod`), with what is expected.
 */
export function parseSpendLimits(value: unknown): ParsedLimits {
  const body = objectAt(typeof value === 'string' ? jsonText(value) : value, 'limits');
  unknownFields(body, LIMIT_FIELDS, 'limits');
  const networks = readNetworks(body.networks);
  const assets = listAt(body.assets, 'limits.assets', 'each asset that may be paid').map(
    (asset, index) => readAsset(asset, `limits.assets[${String(index)}]`, networks),
  );
  const seen = new Set<string>();
  for (const [index, asset] of assets.entries()) {
    const key = `${asset.network} ${asset.asset}`;
    if (seen.has(key)) {
      throw invalid(
        `limits.assets[${String(index)}]`,
        `asset ${asset.asset} on ${asset.network} is listed twice; give each asset one entry with its caps`,
      );
    }
    seen.add(key);
  }
  const limits: SpendLimits = {
    networks,
    assets,
    payees: readPayees(body.payees),
    periodSeconds: readPeriod(body.periodSeconds),
    ...(body.expiresAt === undefined ? {} : { expiresAt: readExpiry(body.expiresAt) }),
  };
  return { limits, canonical: canonicalJson(limits) };
}

function jsonText(text: string): unknown {
  if (text.length > MAX_LIMITS_LENGTH) {
    throw invalid('limits', `the limits are longer than ${String(MAX_LIMITS_LENGTH)} characters`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new AppError('invalid_argument', `limits are not JSON: ${(error as Error).message}`, {
      details: { field: 'limits' },
      cause: error,
    });
  }
}

function readNetworks(value: unknown): string[] {
  const networks = listAt(value, 'limits.networks', 'the networks payments may use');
  return networks.map((network, index) => {
    const field = `limits.networks[${String(index)}]`;
    if (!isEvmNetwork(network)) {
      throw invalid(field, `${shown(network)} is not a CAIP-2 EVM network (eip155:<chain id>)`);
    }
    if (networks.indexOf(network) !== index) {
      throw invalid(field, `network ${network} is listed twice`);
    }
    return network;
  });
}

function readAsset(value: unknown, field: string, networks: readonly string[]): AssetLimit {
  const asset = objectAt(value, field);
  unknownFields(asset, ASSET_FIELDS, field);
  const { network } = asset;
  if (typeof network !== 'string' || !networks.includes(network)) {
    throw invalid(
      `${field}.network`,
      `${shown(network)} is not one of limits.networks (${networks.join(', ')}); an asset's network must be allowed`,
    );
  }
  if (!isEvmAddress(asset.asset)) {
    throw invalid(
      `${field}.asset`,
      `${shown(asset.asset)} is not a token address (0x and 40 hex digits)`,
    );
  }
  return {
    network,
    asset: asset.asset.toLowerCase(),
    maxPerPayment: readCap(asset.maxPerPayment, `${field}.maxPerPayment`),
    maxPerPeriod: readCap(asset.maxPerPeriod, `${field}.maxPerPeriod`),
  };
}

function readCap(value: unknown, field: string): string {
  const problem = amountProblem(value);
  if (problem !== undefined) {
    throw invalid(
      field,
      `${field} ${problem}: a cap is a whole number of the asset's base units, as a string of digits ("1000000")`,
    );
  }
  return value as string;
}

function readPayees(value: unknown): SpendLimits['payees'] {
  if (value === 'any') return 'any';
  if (!Array.isArray(value) || value.length === 0) {
    throw invalid('limits.payees', 'payees is required: "any", or a list of payee addresses');
  }
  const payees = value.map((payee: unknown, index) => {
    if (!isEvmAddress(payee)) {
      throw invalid(
        `limits.payees[${String(index)}]`,
        `${shown(payee)} is not an address (0x and 40 hex digits); payees is "any" or a list of addresses`,
      );
    }
    return payee.toLowerCase();
  });
  return [...new Set(payees)];
}

function readPeriod(value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw invalid(
      'limits.periodSeconds',
      `periodSeconds is required: the window maxPerPeriod counts over, a whole number of seconds above 0${value === undefined ? '' : `, not ${shown(value)}`}`,
    );
  }
  return value;
}

function readExpiry(value: unknown): string {
  if (typeof value !== 'string' || !ISO_INSTANT.test(value) || Number.isNaN(Date.parse(value))) {
    throw invalid(
      'limits.expiresAt',
      `${shown(value)} is not an ISO 8601 instant with its zone (2027-01-01T00:00:00Z)`,
    );
  }
  return new Date(Date.parse(value)).toISOString();
}

function objectAt(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(field, `${field} must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

function listAt(value: unknown, field: string, what: string): unknown[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw invalid(field, `${field} is required: a non-empty list of ${what}`);
  }
  return value as unknown[];
}

function unknownFields(body: Record<string, unknown>, known: Set<string>, field: string): void {
  for (const name of Object.keys(body)) {
    if (!known.has(name)) {
      throw invalid(
        `${field}.${clip(name)}`,
        `unknown field ${JSON.stringify(clip(name))} in ${field}; it takes ${[...known].join(', ')}`,
      );
    }
  }
}

function shown(value: unknown): string {
  return typeof value === 'string'
    ? JSON.stringify(clip(value))
    : clip(String(JSON.stringify(value)));
}

function invalid(field: string, message: string): AppError {
  return new AppError('invalid_argument', message, { details: { field } });
}
