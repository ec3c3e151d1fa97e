import {
  SettlementError,
  SettlementOutcome,
  type PaidResponse,
  type PaymentRequest,
  type SendOptions,
  type Settlement,
} from './settlement';

/** Checks the charge has not expired; an expired one is refused before anything is signed. */
export function refuseIfExpired(expiresAt: string, now: Date): void {
  if (now.getTime() >= Date.parse(expiresAt)) {
    throw new SettlementError(
      SettlementOutcome.Refused,
      `the charge expired at ${expiresAt}; call the tool again for a new challenge`,
      { expiresAt },
    );
  }
}

/**
 * Sends the request with the payment headers added (replacing any of the tool's headers of
 * the same name). A connection that never opened is `refused` (nothing was sent); any
 * other failure after that is `unknown`.
 */
export async function sendPaid(
  request: PaymentRequest,
  paymentHeaders: Record<string, string>,
  options: SendOptions,
): Promise<Response> {
  const headers = new Headers(request.headers);
  for (const [name, value] of Object.entries(paymentHeaders)) headers.set(name, value);
  const doFetch = options.fetch ?? globalThis.fetch;
  try {
    return await doFetch(request.url, {
      method: request.method,
      headers,
      body: request.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs ?? 60_000),
    });
  } catch (error) {
    const code = (error as { cause?: { code?: unknown } }).cause?.code;
    if (code === 'ECONNREFUSED' || code === 'ENOTFOUND') {
      throw new SettlementError(
        SettlementOutcome.Refused,
        `the paid request to ${new URL(request.url).origin} could not connect (${String(code)}); nothing was sent`,
      );
    }
    throw new SettlementError(
      SettlementOutcome.Unknown,
      `the paid request to ${new URL(request.url).origin} got no answer (${(error as Error).name}); the payment may have settled: do not pay again, retry under the same key or resolve the turn`,
    );
  }
}

/** Reads the whole answer body; a body cut off mid-way leaves the outcome unknown. */
export async function readBody(response: Response): Promise<Uint8Array> {
  try {
    return new Uint8Array(await response.arrayBuffer());
  } catch {
    throw new SettlementError(
      SettlementOutcome.Unknown,
      'the paid answer was cut off while its body was read; the payment may have settled',
    );
  }
}

/**
 * The paid answer with its settlement. A receipt (`receiptHeader`) that names no
 * transaction leaves the outcome unknown: the server said it settled, but not where.
 */
export function paidResponse(
  response: Response,
  body: Uint8Array,
  settlement: Settlement,
  receiptHeader: string,
): PaidResponse {
  if (settlement.transaction === '') {
    throw new SettlementError(
      SettlementOutcome.Unknown,
      `the ${receiptHeader} names no transaction; the payment may have settled`,
    );
  }
  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? undefined,
    body,
    settlement,
  };
}
