import { Challenge } from 'mppx';
import { parseAuthChallenges } from './auth-params';
import {
  amountProblem,
  ChallengeError,
  challengeDigest,
  clip,
  isEvmAddress,
  MAX_CHALLENGE_BYTES,
  PaymentProtocolName,
  type Charge,
} from './charge';

/**
 * The MPP challenge (draft-httpauth-payment): a 402's `WWW-Authenticate: Payment` with
 * `id`, `realm`, `method`, `intent`, `request` (base64url of JSON) and optionally
 * `expires`. Pure: the clock comes in as `receivedAt`.
 *
 * Polychrome pays one method, `evm` with intent `charge` (an EIP-3009 authorization,
 * `credentialTypes` including `authorization`, no splits), and only a header with exactly
 * one `Payment` challenge. Without `expires`, a charge expires 5 minutes after it was
 * received (the window mppx's client signs for).
 */

/** The header that carries an MPP challenge. */
export const MPP_CHALLENGE_HEADER = 'www-authenticate';

/** The expiry given to a challenge without `expires`. */
export const MPP_DEFAULT_EXPIRY_SECONDS = 300;

/** A parsed MPP challenge: the neutral charge and the challenge's parameters. */
export interface MppChallenge {
  readonly charge: Charge;
  readonly id: string;
  readonly realm: string;
  /**
   * The challenge says when it expires. Without `expires`, the charge's `expiresAt` is
   * {@link MPP_DEFAULT_EXPIRY_SECONDS} after it was received, so it differs per parse.
   */
  readonly expiresGiven: boolean;
  /** The challenge as a `WWW-Authenticate` value, as mppx's client reads it to pay it. */
  readonly header: string;
}

const fail = (field: string, problem: string): ChallengeError =>
  new ChallengeError(PaymentProtocolName.Mpp, field, problem);

/** True when a `WWW-Authenticate` value carries a `Payment` challenge. */
export function hasMppChallenge(header: string): boolean {
  try {
    return parseAuthChallenges(header).some((c) => c.scheme.toLowerCase() === 'payment');
  } catch {
    return /(^|,)\s*payment\s/i.test(header);
  }
}

/** Parses a `WWW-Authenticate` value received for a request to `requestUrl`. */
export function parseMppChallenge(
  header: string,
  requestUrl: string,
  receivedAt: Date,
): MppChallenge {
  if (header.length > MAX_CHALLENGE_BYTES) {
    throw fail(
      'WWW-Authenticate',
      `is ${header.length} bytes, over the ${MAX_CHALLENGE_BYTES}-byte limit`,
    );
  }
  let challenges;
  try {
    challenges = parseAuthChallenges(header);
  } catch (error) {
    throw fail('WWW-Authenticate', `is malformed (${(error as Error).message})`);
  }
  const payments = challenges.filter((c) => c.scheme.toLowerCase() === 'payment');
  if (payments.length !== 1) {
    throw fail(
      'WWW-Authenticate',
      payments.length === 0
        ? 'has no Payment challenge'
        : `has ${payments.length} Payment challenges; only a header with exactly one is paid`,
    );
  }
  const params = payments[0]!.params;
  const param = (name: string): string => {
    const value = params.get(name);
    if (value === undefined || value === '') throw fail(name, 'is missing');
    return value;
  };
  const id = param('id');
  const realm = param('realm');
  if (param('method') !== 'evm')
    throw fail('method', `is ${clip(param('method'))}; only "evm" is paid`);
  if (param('intent') !== 'charge')
    throw fail('intent', `is ${clip(param('intent'))}; only "charge" is paid`);
  const request = decodeRequest(param('request'));
  const expiresAt = expiry(params.get('expires'), receivedAt);
  return {
    charge: {
      protocol: PaymentProtocolName.Mpp,
      challengeDigest: challengeDigest(header),
      amount: request.amount,
      asset: request.currency.toLowerCase(),
      network: `eip155:${request.chainId}`,
      payee: request.recipient.toLowerCase(),
      resourceUrl: requestUrl,
      expiresAt,
    },
    id,
    realm,
    expiresGiven: params.get('expires') !== undefined,
    header,
  };
}

/**
 * Parses the payment-required object an MCP tool's answer carried (MPP's MCP transport:
 * `{challenges: [...]}`, relayed by the harness as JSON) for the call `resourceUrl`. Only
 * exactly one challenge is paid, as for the header: the approval must show the one that
 * will be paid. The challenge object, checked with mppx's schema, is written as the
 * `WWW-Authenticate` value it stands for (mppx's `Challenge.serialize`, whose fields are
 * the ones its id is bound to) and read by the header's rules; the charge's digest is of
 * the JSON as relayed.
 */
export function parseMppMcpChallenge(
  json: string,
  resourceUrl: string,
  receivedAt: Date,
): MppChallenge {
  if (json.length > MAX_CHALLENGE_BYTES) {
    throw fail(
      'payment-required',
      `is ${json.length} bytes, over the ${MAX_CHALLENGE_BYTES}-byte limit`,
    );
  }
  let data: unknown;
  try {
    data = JSON.parse(json);
  } catch {
    throw fail('payment-required', 'is not JSON');
  }
  const challenges = (data as { challenges?: unknown } | null)?.challenges;
  if (!Array.isArray(challenges) || challenges.length !== 1) {
    throw fail(
      'challenges',
      Array.isArray(challenges)
        ? `has ${challenges.length} challenges; only exactly one is paid`
        : 'is missing',
    );
  }
  const checked = Challenge.Schema.safeParse(challenges[0]);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    const path = issue?.path.map(String).join('.') ?? '';
    throw fail(
      `challenges[0]${path === '' ? '' : `.${path}`}`,
      `is not part of an MPP challenge (${clip(issue?.message ?? 'invalid')})`,
    );
  }
  let header: string;
  try {
    header = Challenge.serialize(checked.data);
  } catch (error) {
    throw fail('challenges[0]', `cannot be read (${clip((error as Error).message)})`);
  }
  const read = parseMppChallenge(header, resourceUrl, receivedAt);
  return { ...read, charge: { ...read.charge, challengeDigest: challengeDigest(json) } };
}

function decodeRequest(encoded: string): {
  amount: string;
  currency: string;
  recipient: string;
  chainId: number;
} {
  if (!/^[A-Za-z0-9_-]+={0,2}$/.test(encoded)) throw fail('request', 'is not base64url');
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as Record<
      string,
      unknown
    >;
  } catch {
    throw fail('request', 'is base64url but not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw fail('request', 'is not a JSON object');
  const problem = amountProblem(body.amount);
  if (problem !== undefined) throw fail('request.amount', problem);
  if (!isEvmAddress(body.currency)) throw fail('request.currency', 'is not a token address');
  if (!isEvmAddress(body.recipient)) throw fail('request.recipient', 'is not an address');
  const details = body.methodDetails as Record<string, unknown> | undefined;
  const chainId = details?.chainId;
  if (typeof chainId !== 'number' || !Number.isSafeInteger(chainId) || chainId < 1) {
    throw fail('request.methodDetails.chainId', 'is not a positive whole number');
  }
  const types = details?.credentialTypes;
  if (types !== undefined && !(Array.isArray(types) && types.includes('authorization'))) {
    throw fail(
      'request.methodDetails.credentialTypes',
      'does not accept an EIP-3009 authorization',
    );
  }
  if (Array.isArray(details?.splits) && details.splits.length > 0) {
    throw fail('request.methodDetails.splits', 'splits the payment; only a single payee is paid');
  }
  return {
    amount: body.amount as string,
    currency: body.currency,
    recipient: body.recipient,
    chainId,
  };
}

function expiry(expires: string | undefined, receivedAt: Date): string {
  if (expires === undefined) {
    return new Date(receivedAt.getTime() + MPP_DEFAULT_EXPIRY_SECONDS * 1000).toISOString();
  }
  const at = Date.parse(expires);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(expires) || Number.isNaN(at))
    throw fail('expires', `is not an RFC 3339 time ("${clip(expires)}")`);
  if (at <= receivedAt.getTime())
    throw fail('expires', `is ${new Date(at).toISOString()}, already past`);
  return new Date(at).toISOString();
}
