import { Credential } from 'mppx';
import { evm, Mppx } from 'mppx/client';
import { toAccount } from 'viem/accounts';
import {
  MPP_CREDENTIAL_SLACK_MS,
  authorizationValidUntilMs,
  challengeDigest,
  type Charge,
} from './charge';
import { parseMppChallenge, type MppChallenge } from './mpp-challenge';
import { paidResponse, readBody, refuseIfExpired, sendPaid } from './send-paid';
import {
  SettlementError,
  SettlementOutcome,
  type PaidResponse,
  type SettleInput,
} from './settlement';
import type { Wallet } from './wallet';

/**
 * Pays an approved MPP charge: `mppx`'s client signs the `evm` charge credential (an
 * EIP-3009 authorization whose nonce is the hash of the challenge, so one challenge can
 * move money once) with the wallet, and the request goes again with the credential in
 * `Authorization: Payment` and the idempotency key in `Idempotency-Key`. The settlement
 * is read from `Payment-Receipt` (base64url JSON; `reference` is the transaction).
 */
export async function settleMpp(
  input: SettleInput & {
    /**
     * The EIP-712 domain of the charge's token (MPP's `evm` request does not carry it;
     * x402's does): from the control plane's table of known tokens, never the challenge.
     */
    readonly tokenDomain: TokenDomain;
  },
): Promise<PaidResponse> {
  const { charge, challenge, wallet, request, idempotencyKey } = input;
  const options = input.options ?? {};
  const now = (options.now ?? (() => new Date()))();
  const { header } = checkBound(charge, challenge, request.url, now);
  refuseIfExpired(charge.expiresAt, now);
  const signed = await signMppCredential(header, wallet, input.tokenDomain, charge);
  const headers = mppCredentialHeaders(request.headers, signed.headers);
  const response = await sendPaid(
    request,
    { ...headers, 'idempotency-key': idempotencyKey },
    options,
  );
  const body = await readBody(response);
  const receipt = response.headers.get('payment-receipt');
  if (
    response.status === 402 ||
    (response.status >= 400 && response.status < 500 && receipt === null)
  ) {
    throw new SettlementError(
      SettlementOutcome.Rejected,
      `the server did not take the MPP payment (${response.status})`,
      { status: String(response.status) },
    );
  }
  if (receipt === null || response.status >= 300) {
    throw new SettlementError(
      SettlementOutcome.Unknown,
      `the paid request answered ${response.status} without a Payment-Receipt; the payment may have settled`,
      { status: String(response.status) },
    );
  }
  return paidResponse(
    response,
    body,
    {
      protocol: charge.protocol,
      transaction: receiptReference(receipt),
      payer: wallet.address.toLowerCase(),
      network: charge.network,
      idempotencyKey,
      upstreamReceipt: receipt,
    },
    'Payment-Receipt',
  );
}

/**
 * Re-parses the challenge (`parse`: the header's, or MCP's payment-required object's) and
 * checks it is the one the charge was approved for; refused (nothing signed) otherwise.
 */
export function checkBound(
  charge: Charge,
  challenge: string,
  url: string,
  now: Date,
  parse: typeof parseMppChallenge = parseMppChallenge,
): MppChallenge {
  const refuse = (): never => {
    throw new SettlementError(
      SettlementOutcome.Refused,
      'the challenge or URL is not the one the charge was approved for; a new approval is needed',
    );
  };
  if (challengeDigest(challenge) !== charge.challengeDigest || charge.resourceUrl !== url) refuse();
  let parsed: MppChallenge;
  try {
    parsed = parse(challenge, url, now);
  } catch (error) {
    throw new SettlementError(SettlementOutcome.Refused, (error as Error).message);
  }
  // Without `expires`, the charge's expiry came from when it was received, not from the
  // challenge (whose bytes the digest binds): a parse now gives another.
  const fields = ['amount', 'asset', 'payee', 'network', 'expiresAt'] as const;
  for (const field of parsed.expiresGiven ? fields : fields.slice(0, -1)) {
    if (parsed.charge[field] !== charge[field]) refuse();
  }
  return parsed;
}

/**
 * Where the credential goes: `Authorization: Payment ...`, or `Payment-Authorization` when
 * the tool's request keeps its own `Authorization` (a bearer token), as the MPP draft says.
 */
export function mppCredentialHeaders(
  requestHeaders: Readonly<Record<string, string>>,
  credential: Record<string, string>,
): Record<string, string> {
  const value = credential.authorization;
  if (value === undefined) return credential;
  const keepsOwn = Object.keys(requestHeaders).some(
    (name) => name.toLowerCase() === 'authorization',
  );
  return keepsOwn ? { 'payment-authorization': value } : { authorization: value };
}

/** A token's EIP-712 domain name and version (USDC: "USD Coin", "2"). */
export interface TokenDomain {
  readonly name: string;
  readonly version: string;
}

/** A signed MPP credential: mppx's serialized form, and the request headers that carry it. */
export interface MppCredential {
  readonly serialized: string;
  readonly headers: Record<string, string>;
}

/**
 * Signs the `evm` charge credential of a challenge (`header`, a `WWW-Authenticate` value)
 * with the wallet, through mppx's client. Refused (nothing sent) when it cannot be made or
 * stays valid past what the charge allows.
 */
export async function signMppCredential(
  header: string,
  wallet: Wallet,
  tokenDomain: TokenDomain,
  charge: Charge,
): Promise<MppCredential> {
  const unsupported = (): never => {
    throw new Error('an MPP wallet signs typed data only');
  };
  const account = toAccount({
    address: wallet.address,
    signTypedData: (message) =>
      wallet.signTypedData(message as Parameters<Wallet['signTypedData']>[0]),
    signMessage: unsupported,
    signTransaction: unsupported,
  });
  try {
    const mppx = Mppx.create({
      methods: [evm.charge({ account, authorization: { ...tokenDomain } })],
      polyfill: false,
    });
    const prepared = await mppx.preparePayment(
      new Response(null, { status: 402, headers: { 'www-authenticate': header } }),
    );
    const serialized = await prepared.createCredential();
    checkValidBefore(serialized, charge);
    const init = prepared.setCredential({ headers: {} }, serialized);
    return { serialized, headers: Object.fromEntries(new Headers(init.headers).entries()) };
  } catch (error) {
    throw new SettlementError(
      SettlementOutcome.Refused,
      `the MPP credential could not be made (${(error as Error).message.slice(0, 200)}); nothing was sent`,
    );
  }
}

/**
 * Refuses a credential whose authorization stays valid past what the charge allows
 * (charge.ts `authorizationValidUntilMs`): an admin resolving a lost payment as never made
 * relies on it being unusable after that.
 */
function checkValidBefore(serialized: string, charge: Charge): void {
  const { payload } = Credential.deserialize<{ validBefore?: unknown }>(serialized);
  const validBefore = Number(payload.validBefore);
  const limitMs = authorizationValidUntilMs(charge) ?? Number.NaN;
  if (!Number.isSafeInteger(validBefore) || !(validBefore * 1000 <= limitMs)) {
    throw new Error(
      `its authorization is valid before ${String(payload.validBefore)}, past ${new Date(limitMs).toISOString()} (the charge's expiry and ${MPP_CREDENTIAL_SLACK_MS / 60_000} minutes)`,
    );
  }
}

/** The `reference` of a `Payment-Receipt` (base64url JSON), or "" when it has none. */
function receiptReference(receipt: string): string {
  try {
    const decoded = JSON.parse(Buffer.from(receipt, 'base64url').toString('utf8')) as {
      reference?: unknown;
    };
    return typeof decoded.reference === 'string' ? decoded.reference : '';
  } catch {
    return '';
  }
}
