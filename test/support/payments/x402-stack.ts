import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Express } from 'express';
import { x402Facilitator } from '@x402/core/facilitator';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { registerExactEvmScheme as registerFacilitatorScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import { paymentMiddleware } from '@x402/express';
import { createWalletClient, http, publicActions, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ANVIL_NETWORK, type Anvil } from '../chain/anvil';
import { ANVIL_POLLING_MS, anvilChain, TOKEN_NAME, TOKEN_VERSION } from '../chain/token';

/**
 * A real x402 v2 stack for tests, built from the `@x402/*` packages only:
 *
 * - a facilitator: `x402Facilitator` from `@x402/core` with `@x402/evm`'s `exact` scheme
 *   registered for anvil's network, its viem wallet paying the gas, served over HTTP as
 *   the protocol's `GET /supported`, `POST /verify` and `POST /settle`;
 * - a resource server: express with `@x402/express`'s `paymentMiddleware`, talking to
 *   that facilitator through `HTTPFacilitatorClient`. `GET /paid` costs `price` base
 *   units of the token, paid to `payTo`; `GET /free` is the same handler unpaid.
 *
 * Settlement moves tokens on anvil for real (EIP-3009 `transferWithAuthorization`).
 */
export interface X402Stack {
  readonly facilitatorUrl: string;
  readonly resourceUrl: string;
  /** How many times the paid handler ran (it runs only after a payment verifies). */
  readonly paidHandlerRuns: () => number;
  /** How many `POST /settle` the facilitator served, and how many succeeded. */
  readonly settles: () => { total: number; succeeded: number };
  /** Every `PAYMENT-SIGNATURE` header `GET /paid` received, in order. */
  readonly paymentSignatures: () => readonly string[];
  close(): Promise<void>;
}

/** What `GET /paid` costs. */
export interface X402Offer {
  readonly token: Address;
  readonly payTo: Address;
  /** Base units of the token (6 decimals). */
  readonly price: string;
  readonly maxTimeoutSeconds?: number;
}

/** Starts the facilitator (gas paid by `facilitatorKey`) and the resource server. */
export async function startX402Stack(
  anvil: Anvil,
  facilitatorKey: Hex,
  offer: X402Offer,
): Promise<X402Stack> {
  const counts = { paid: 0, settles: 0, settled: 0 };
  const facilitatorApp = facilitatorHttp(anvil, facilitatorKey, counts);
  const facilitator = await listen(facilitatorApp);
  const facilitatorUrl = `http://127.0.0.1:${port(facilitator)}`;

  const resourceServer = new x402ResourceServer(
    new HTTPFacilitatorClient({ url: facilitatorUrl }),
  ).register(ANVIL_NETWORK, new ExactEvmScheme());
  const app = express();
  const signatures: string[] = [];
  app.use((req, _res, next) => {
    const header = req.headers['payment-signature'];
    if (typeof header === 'string') signatures.push(header);
    next();
  });
  app.use(
    paymentMiddleware(
      {
        'GET /paid': {
          accepts: {
            scheme: 'exact',
            network: ANVIL_NETWORK,
            payTo: offer.payTo,
            price: {
              asset: offer.token,
              amount: offer.price,
              extra: { name: TOKEN_NAME, version: TOKEN_VERSION },
            },
            maxTimeoutSeconds: offer.maxTimeoutSeconds ?? 120,
          },
          description: 'A paid test resource',
          mimeType: 'application/json',
        },
      },
      resourceServer,
    ),
  );
  app.get('/paid', (_req, res) => {
    counts.paid += 1;
    res.json({ content: 'paid content', run: counts.paid });
  });
  app.get('/free', (_req, res) => {
    res.json({ content: 'free content' });
  });
  const resource = await listen(app);
  return {
    facilitatorUrl,
    resourceUrl: `http://127.0.0.1:${port(resource)}`,
    paidHandlerRuns: () => counts.paid,
    settles: () => ({ total: counts.settles, succeeded: counts.settled }),
    paymentSignatures: () => signatures,
    close: async () => {
      await Promise.all([stop(resource), stop(facilitator)]);
    },
  };
}

function facilitatorHttp(
  anvil: Anvil,
  key: Hex,
  counts: { settles: number; settled: number },
): Express {
  const account = privateKeyToAccount(key);
  const client = createWalletClient({
    account,
    chain: anvilChain(anvil),
    transport: http(),
    pollingInterval: ANVIL_POLLING_MS,
  }).extend(publicActions);
  const signer = toFacilitatorEvmSigner({
    address: account.address,
    readContract: (args) => client.readContract(args),
    verifyTypedData: (args) =>
      client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]),
    writeContract: (args) => client.writeContract(args),
    sendTransaction: (args) => client.sendTransaction(args),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
    getCode: (args) => client.getCode(args),
  });
  const facilitator = registerFacilitatorScheme(new x402Facilitator(), {
    signer,
    networks: ANVIL_NETWORK,
  });
  const app = express();
  app.use(express.json());
  app.get('/supported', (_req, res) => {
    res.json(facilitator.getSupported());
  });
  app.post('/verify', (req, res, next) => {
    const body = req.body as {
      paymentPayload: PaymentPayload;
      paymentRequirements: PaymentRequirements;
    };
    facilitator
      .verify(body.paymentPayload, body.paymentRequirements)
      .then((result) => res.json(result))
      .catch(next);
  });
  app.post('/settle', (req, res, next) => {
    counts.settles += 1;
    const body = req.body as {
      paymentPayload: PaymentPayload;
      paymentRequirements: PaymentRequirements;
    };
    facilitator
      .settle(body.paymentPayload, body.paymentRequirements)
      .then((result) => {
        if (result.success) counts.settled += 1;
        res.json(result);
      })
      .catch(next);
  });
  return app;
}

async function listen(app: Express): Promise<Server> {
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

function port(server: Server): number {
  return (server.address() as AddressInfo).port;
}

async function stop(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
