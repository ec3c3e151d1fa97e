/**
 * Spend limits an admin links a wallet with in the tests (docs/payments.md, "Linking a
 * wallet"): USDC on Base, at most 1 USDC a payment and 20 a day, to any payee. Addresses are
 * lower-case, as the control plane keeps them, so an answer's `limits` equals this.
 */
export const EXAMPLE_SPEND_LIMITS = {
  networks: ['eip155:8453'],
  assets: [
    {
      network: 'eip155:8453',
      asset: '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913',
      maxPerPayment: '1000000',
      maxPerPeriod: '20000000',
    },
  ],
  payees: 'any',
  periodSeconds: 86_400,
} as const;
