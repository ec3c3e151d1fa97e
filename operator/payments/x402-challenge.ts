import {
  amountProblem,
  ChallengeError,
  challengeDigest,
  clip,
  isEvmAddress,
  isEvmNetwork,
  MAX_CHALLENGE_BYTES,
  PaymentProtocolName,
  type Charge,
} from './charge';

/**
 * The x402 v2 challenge: a 402's `PAYMENT-REQUIRED` header, base64 of JSON
 * `{x402Version: 2, resource: {url}, accepts: [{scheme, network, amount, asset, payTo,
 * maxTimeoutSeconds, extra}]}`, or that JSON object in an MCP tool's result (x402's MCP
 * transport). Pure: no I/O, the clock comes in as `receivedAt`.
 *
 * Polychrome pays the `exact` scheme on EVM networks with an EIP-3009 token (the EIP-712
 * domain `extra.name` and `extra.version` are required), and only a challenge that offers
 * exactly one way to pay, so the approval shows exactly what will be paid.
 */

/** The header that carries an x402 challenge (HTTP header names are case-insensitive). */
export const X402_CHALLENGE_HEADER = 'payment-required';

/** The longest payment window accepted from `maxTimeoutSeconds` (one hour). */
export const X402_MAX_TIMEOUT_SECONDS = 3600;

/** The one offer of a parsed challenge, as x402 names its fields. */
export interface X402Requirements {
  readonly scheme: 'exact';
  readonly network: `${string}:${string}`;
  readonly amount: string;
  readonly asset: string;
  readonly payTo: string;
  readonly maxTimeoutSeconds: number;
  readonly extra: { readonly name: string; readonly version: string } & Record<string, unknown>;
}

/** A parsed challenge: the neutral charge and the decoded x402 body it came from. */
export interface X402Challenge {
  readonly charge: Charge;
  /** The decoded JSON, as the x402 client packages take it. */
  readonly paymentRequired: Record<string, unknown> & { readonly x402Version: 2 };
  readonly requirements: X402Requirements;
}

const fail = (field: string, problem: string): ChallengeError =>
  new ChallengeError(PaymentProtocolName.X402, field, problem);

/** Parses a `PAYMENT-REQUIRED` value received for a request to `requestUrl`. */
export function parseX402Challenge(
  header: string,
  requestUrl: string,
  receivedAt: Date,
): X402Challenge {
  const body = decode(header);
  checkResource(body.resource, requestUrl);
  return x402Body(body, challengeDigest(header), requestUrl, receivedAt);
}

/**
 * Parses the `PaymentRequired` object an MCP tool's result carried (x402's MCP transport),
 * as JSON, for the call `resourceUrl` (`mcp://<server>/<tool>`). The stated
 * `resource.url` is the server's own name for the tool (`mcp://tool/<name>`) and is not
 * checked against the call: the control plane binds the charge to the committed call it
 * names instead (operator/turns/plan-payments.ts).
 */
export function parseX402McpChallenge(
  json: string,
  resourceUrl: string,
  receivedAt: Date,
): X402Challenge {
  if (json.length > MAX_CHALLENGE_BYTES) {
    throw fail(
      'PaymentRequired',
      `is ${json.length} bytes, over the ${MAX_CHALLENGE_BYTES}-byte limit`,
    );
  }
  return x402Body(
    objectOf(json, 'PaymentRequired', 'is not JSON'),
    challengeDigest(json),
    resourceUrl,
    receivedAt,
  );
}

/** The charge of a decoded `PaymentRequired` body, whose exact bytes digest to `digest`. */
function x402Body(
  body: Record<string, unknown>,
  digest: string,
  resourceUrl: string,
  receivedAt: Date,
): X402Challenge {
  if (body.x402Version !== 2) {
    throw fail(
      'x402Version',
      `is ${clip(JSON.stringify(body.x402Version) ?? 'missing')}, not 2 (only x402 v2 is paid)`,
    );
  }
  const accepts = body.accepts;
  if (!Array.isArray(accepts) || accepts.length === 0) throw fail('accepts', 'is missing or empty');
  if (accepts.length > 1) {
    throw fail(
      'accepts',
      `offers ${accepts.length} ways to pay; only a challenge with exactly one is paid, so the approval shows what is paid`,
    );
  }
  const requirements = checkRequirements(accepts[0]);
  const expiresAt = new Date(receivedAt.getTime() + requirements.maxTimeoutSeconds * 1000);
  return {
    charge: {
      protocol: PaymentProtocolName.X402,
      challengeDigest: digest,
      amount: requirements.amount,
      asset: requirements.asset.toLowerCase(),
      network: requirements.network,
      payee: requirements.payTo.toLowerCase(),
      resourceUrl,
      expiresAt: expiresAt.toISOString(),
    },
    paymentRequired: body as X402Challenge['paymentRequired'],
    requirements,
  };
}

function decode(header: string): Record<string, unknown> {
  if (header.length > MAX_CHALLENGE_BYTES) {
    throw fail(
      'PAYMENT-REQUIRED',
      `is ${header.length} bytes, over the ${MAX_CHALLENGE_BYTES}-byte limit`,
    );
  }
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(header) || header.length % 4 !== 0) {
    throw fail('PAYMENT-REQUIRED', 'is not base64');
  }
  return objectOf(
    Buffer.from(header, 'base64').toString('utf8'),
    'PAYMENT-REQUIRED',
    'is base64 but not JSON',
  );
}

/** The JSON object `text` holds; `field` and `notJson` name the refusal. */
function objectOf(text: string, field: string, notJson: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw fail(field, notJson);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw fail(field, 'is not a JSON object');
  }
  return parsed as Record<string, unknown>;
}

function checkResource(resource: unknown, requestUrl: string): void {
  const url = (resource as { url?: unknown } | undefined)?.url;
  if (typeof url !== 'string') throw fail('resource.url', 'is missing');
  let stated: URL;
  try {
    stated = new URL(url);
  } catch {
    throw fail('resource.url', `is not a URL ("${clip(url)}")`);
  }
  if (stated.origin !== new URL(requestUrl).origin) {
    throw fail('resource.url', `names ${clip(stated.origin)}, not the origin the request went to`);
  }
}

function checkRequirements(offer: unknown): X402Requirements {
  if (typeof offer !== 'object' || offer === null) throw fail('accepts[0]', 'is not an object');
  const o = offer as Record<string, unknown>;
  if (o.scheme !== 'exact') {
    throw fail('accepts[0].scheme', `is ${clip(String(o.scheme))}; only "exact" is paid`);
  }
  if (!isEvmNetwork(o.network)) {
    throw fail(
      'accepts[0].network',
      `is ${clip(String(o.network))}, not an EVM CAIP-2 network (eip155:<chain id>)`,
    );
  }
  const problem = amountProblem(o.amount);
  if (problem !== undefined) throw fail('accepts[0].amount', problem);
  if (!isEvmAddress(o.asset)) throw fail('accepts[0].asset', 'is not a token address');
  if (!isEvmAddress(o.payTo)) throw fail('accepts[0].payTo', 'is not an address');
  const timeout = o.maxTimeoutSeconds;
  if (
    typeof timeout !== 'number' ||
    !Number.isInteger(timeout) ||
    timeout < 1 ||
    timeout > X402_MAX_TIMEOUT_SECONDS
  ) {
    throw fail(
      'accepts[0].maxTimeoutSeconds',
      `is not a whole number of seconds from 1 to ${X402_MAX_TIMEOUT_SECONDS}`,
    );
  }
  const extra = o.extra as Record<string, unknown> | undefined;
  if (typeof extra?.name !== 'string' || typeof extra.version !== 'string') {
    throw fail('accepts[0].extra', "lacks the token's EIP-712 domain (name and version)");
  }
  if (extra.assetTransferMethod !== undefined && extra.assetTransferMethod !== 'eip3009') {
    throw fail(
      'accepts[0].extra.assetTransferMethod',
      `is ${clip(JSON.stringify(extra.assetTransferMethod))}; only EIP-3009 is paid`,
    );
  }
  return o as unknown as X402Requirements;
}
