import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { evm, Mppx } from 'mppx/express';
import type { Address } from 'viem';
import { ANVIL_CHAIN_ID } from '../chain/anvil';
import { TOKEN_DECIMALS, TOKEN_NAME, TOKEN_VERSION } from '../chain/token';

/**
 * A real MPP server (draft-httpauth-payment) for tests, built with `mppx`'s express
 * middleware and its `evm` charge method: `GET /paid` answers 402 with
 * `WWW-Authenticate: Payment` (method `evm`, intent `charge`, an HMAC-bound id) until a
 * credential carrying an EIP-3009 authorization arrives in `Authorization: Payment`;
 * mppx then settles it through the x402 facilitator at `facilitatorUrl` (on anvil, no
 * network beyond this machine) and answers with a `Payment-Receipt`.
 */
export interface MppServer {
  readonly url: string;
  readonly paidHandlerRuns: () => number;
  /** Every `Payment` credential `GET /paid` received (`Authorization` or `Payment-Authorization`), in order. */
  readonly credentials: () => readonly string[];
  close(): Promise<void>;
}

/** What `GET /paid` costs, in display units of the token (`"1.25"` is 1 250 000 base units). */
export interface MppOffer {
  readonly token: Address;
  readonly payTo: Address;
  readonly amount: string;
  readonly facilitatorUrl: string;
}

/** The realm and HMAC key the test sellers sign their challenges with. */
export const MPP_TEST_SERVER = {
  realm: 'polychrome-test',
  secretKey: 'a test secret of at least thirty-two bytes, HMAC key',
} as const;

/** mppx's `evm` charge of the test token to `payTo`, settled through the facilitator. */
export function mppEvmCharge(offer: Pick<MppOffer, 'token' | 'payTo' | 'facilitatorUrl'>) {
  return evm.charge({
    currency: offer.token,
    recipient: offer.payTo,
    chainId: ANVIL_CHAIN_ID,
    decimals: TOKEN_DECIMALS,
    authorization: { name: TOKEN_NAME, version: TOKEN_VERSION },
    x402: { facilitator: offer.facilitatorUrl },
  });
}

export async function startMppServer(offer: MppOffer): Promise<MppServer> {
  const mppx = Mppx.create({ methods: [mppEvmCharge(offer)], ...MPP_TEST_SERVER });
  let runs = 0;
  const app = express();
  const credentials: string[] = [];
  app.use((req, _res, next) => {
    for (const name of ['authorization', 'payment-authorization']) {
      const value = req.headers[name];
      if (typeof value === 'string' && /^Payment\s/iu.test(value)) credentials.push(value);
    }
    next();
  });
  const paid: express.RequestHandler = (_req, res) => {
    runs += 1;
    res.json({ content: 'paid by mpp', run: runs });
  };
  app.get('/paid', mppx.charge({ amount: offer.amount }), paid);
  // A challenge without `expires`: the client decides how long its credential is valid.
  app.get('/paid-no-expiry', mppx.charge({ amount: offer.amount, expires: undefined }), paid);
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    paidHandlerRuns: () => runs,
    credentials: () => credentials,
    close: () => stop(server),
  };
}

async function stop(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
