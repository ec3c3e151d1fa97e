import { AppError, ErrorCode } from '../../common/errors';
import { clip, isEvmAddress, isEvmNetwork } from './charge';
import type { TokenDomain } from './mpp-settle';

/**
 * The control plane's MPP token table (docs/payments.md, "Turning payments on"): the
 * tokens it pays MPP charges in, each with its EIP-712 domain. MPP's `evm` request names a
 * token by address only, and an EIP-3009 authorization is signed over the token's domain,
 * so the domain comes from this table, written by the operator, never from the challenge.
 * A charge in a token the table does not list is refused before anyone is asked.
 */

/** One row: a token contract on a network, and its EIP-712 domain name and version. */
export interface MppToken {
  /** CAIP-2, `eip155:<chain id>`. */
  readonly network: string;
  /** The token contract, lower-case hex. */
  readonly asset: string;
  /** The domain's `name` (the contract's `name()`, "USD Coin" for USDC). */
  readonly name: string;
  /** The domain's `version` ("2" for USDC). */
  readonly version: string;
}

/** What one row looks like, for error messages. */
const ROW_SHAPE =
  '{"network": "eip155:<chain id>", "asset": "0x<40 hex digits>", "name": "<EIP-712 domain name>", "version": "<EIP-712 domain version>"}';

const FIELDS = ['network', 'asset', 'name', 'version'] as const;

const invalid = (field: string, problem: string): AppError =>
  new AppError(ErrorCode.InvalidArgument, `${field} ${problem}; each token is ${ROW_SHAPE}`, {
    details: { field },
  });

/**
 * Checks a decoded table (a JSON list of rows): every field present and well formed, no
 * other field, each (network, asset) once. Addresses come back lower-case.
 *
 * @throws AppError (`invalid_argument`) whose message and `details.field` name the first
 *   bad part (`[1].asset`).
 */
export function parseMppTokens(value: unknown): readonly MppToken[] {
  if (!Array.isArray(value)) throw invalid('the table', 'is not a JSON list');
  const seen = new Set<string>();
  return value.map((row: unknown, index): MppToken => {
    const at = `[${index}]`;
    if (typeof row !== 'object' || row === null || Array.isArray(row)) {
      throw invalid(at, 'is not a JSON object');
    }
    const fields = row as Record<string, unknown>;
    const unknown = Object.keys(fields).find((key) => !(FIELDS as readonly string[]).includes(key));
    if (unknown !== undefined) throw invalid(`${at}.${clip(unknown)}`, 'is not a field of a token');
    for (const field of FIELDS) {
      const text = fields[field];
      if (typeof text !== 'string' || text.trim() === '') {
        throw invalid(`${at}.${field}`, 'is missing or not a non-empty string');
      }
      if (text !== text.trim()) {
        // A signature is over the exact bytes: " USD Coin" is another domain.
        throw invalid(`${at}.${field}`, `("${clip(text)}") has white space around it`);
      }
    }
    const { network, asset, name, version } = fields as Record<(typeof FIELDS)[number], string>;
    if (!isEvmNetwork(network)) {
      throw invalid(`${at}.network`, `("${clip(network)}") is not a CAIP-2 EVM network`);
    }
    if (!isEvmAddress(asset)) {
      throw invalid(`${at}.asset`, `("${clip(asset)}") is not a token contract address`);
    }
    const token = { network, asset: asset.toLowerCase(), name, version };
    const key = tokenKey(token.network, token.asset);
    if (seen.has(key)) throw invalid(at, `lists ${token.asset} on ${network} a second time`);
    seen.add(key);
    return token;
  });
}

/** The lookup `mppProtocol` takes: a token's EIP-712 domain, or undefined when unlisted. */
export function mppTokenDomains(
  tokens: readonly MppToken[],
): (network: string, asset: string) => TokenDomain | undefined {
  const table = new Map(
    tokens.map((t) => [tokenKey(t.network, t.asset), { name: t.name, version: t.version }]),
  );
  return (network, asset) => table.get(tokenKey(network, asset.toLowerCase()));
}

function tokenKey(network: string, asset: string): string {
  return `${network} ${asset}`;
}
