import { expect } from '@jest/globals';

/**
 * The search for a paid turn's secret material in what it left behind (docs/payments.md,
 * "Wallets and the SecretStore"): the journal and every log line
 * (test/integration/paid-turn-crashes.test.ts), every exported span
 * (test/integration/paid-turn-traces.test.ts). What a wallet signs must stay where it was
 * sent: the wallet's key, and the authorizations the sellers received.
 */
export interface PaymentSecrets {
  /** The wallet's private key, hex (with or without `0x`). */
  readonly payerKey: string;
  /** Every `PAYMENT-SIGNATURE` header value an x402 seller received (base64 JSON). */
  readonly paymentSignatures?: readonly string[];
  /** Every `Authorization: Payment` value an MPP seller received (`Payment <base64url JSON>`). */
  readonly mppCredentials?: readonly string[];
}

/** One form of a secret to look for: its name in a failure, and whether case is ignored. */
interface Needle {
  readonly name: string;
  readonly value: string;
  readonly anyCase: boolean;
}

function hexForms(name: string, hex: string): Needle[] {
  const bare = hex.replace(/^0x/iu, '');
  const bytes = Buffer.from(bare, 'hex');
  return [
    // Lower-cased on both sides: with and without 0x, either case.
    { name: `${name} as hex`, value: bare.toLowerCase(), anyCase: true },
    { name: `${name} as base64`, value: bytes.toString('base64'), anyCase: false },
    { name: `${name} as base64url`, value: bytes.toString('base64url'), anyCase: false },
  ];
}

/** The EIP-3009 signature inside an x402 `PAYMENT-SIGNATURE` or an MPP credential. */
function signatureOf(json: string): string {
  const { payload } = JSON.parse(json) as { payload?: { signature?: unknown } };
  const signature = payload?.signature;
  if (typeof signature !== 'string' || !/^0x[0-9a-f]{130}$/iu.test(signature)) {
    throw new Error(`no EIP-3009 signature in the payload the seller received: ${json}`);
  }
  return signature;
}

function needlesOf(secrets: PaymentSecrets): Needle[] {
  const needles = hexForms('the wallet key', secrets.payerKey);
  // base64 of the key's hex text, and its decimal value (key-leak.test.ts's forms).
  const bare = secrets.payerKey.replace(/^0x/iu, '').toLowerCase();
  needles.push(
    {
      name: 'the wallet key, base64 of its hex',
      value: Buffer.from(bare).toString('base64'),
      anyCase: false,
    },
    { name: 'the wallet key as decimal', value: BigInt(`0x${bare}`).toString(10), anyCase: false },
  );
  for (const [i, header] of (secrets.paymentSignatures ?? []).entries()) {
    const name = `PAYMENT-SIGNATURE ${i}`;
    needles.push({ name, value: header, anyCase: false });
    const json = Buffer.from(header, 'base64').toString('utf8');
    needles.push(...hexForms(`the EIP-3009 signature of ${name}`, signatureOf(json)));
  }
  for (const [i, value] of (secrets.mppCredentials ?? []).entries()) {
    const name = `MPP credential ${i}`;
    const token = /^Payment\s+(\S+)$/iu.exec(value)?.[1];
    if (token === undefined) throw new Error(`${name} is not "Payment <credential>": ${value}`);
    needles.push({ name, value: token, anyCase: false });
    const json = Buffer.from(token, 'base64url').toString('utf8');
    needles.push(...hexForms(`the EIP-3009 signature of ${name}`, signatureOf(json)));
  }
  return needles;
}

/**
 * Expects `text` to hold none of `secrets`, in any of their forms; a failure names the
 * forms found, never the text. Each list given must hold something (a seller that received
 * nothing would make the search vacuous).
 */
export function expectNoPaymentSecrets(text: string, secrets: PaymentSecrets): void {
  for (const list of [secrets.paymentSignatures, secrets.mppCredentials]) {
    if (list !== undefined) expect(list.length).toBeGreaterThan(0);
  }
  const lower = text.toLowerCase();
  const found = needlesOf(secrets)
    .filter((needle) => (needle.anyCase ? lower : text).includes(needle.value))
    .map((needle) => needle.name);
  expect(found).toEqual([]);
}
