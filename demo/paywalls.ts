import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { x402Facilitator } from '@x402/core/facilitator';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import type { FacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme as FacilitatorScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmScheme as ServerScheme } from '@x402/evm/exact/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/hono';
import { Hono } from 'hono';
import { Mppx, tempo } from 'mppx/server';
import { createClient, custom, keccak256, verifyTypedData, type Address, type Hex } from 'viem';
import { tempoModerato } from 'viem/chains';

/**
 * Two local paywalls for the demo, built from the protocols' own packages: an x402 paywall
 * (@x402/hono, the reference facilitator in process) on Base Sepolia, and an MPP paywall (mppx,
 * `tempo.charge`) on Tempo's testnet. Only the chain is simulated: the facilitator checks each
 * EIP-3009 signature with viem and "settles" without a node, and the MPP paywall's Tempo RPC
 * accepts every broadcast. Nothing leaves the machine.
 */

export const X402_PAY_TO: Address = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C';
export const MPP_RECIPIENT: Address = '0x742d35Cc6634c0532925a3b844bC9e7595F8fE00';
const BASE_SEPOLIA_USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const FACILITATOR: Address = '0x000000000000000000000000000000000000fac1';

export type Paywall = { url: string; host: string; close: () => Promise<void> };

async function listen(fetch: (request: Request) => Response | Promise<Response>): Promise<Paywall> {
  const server = serve({ fetch, port: 0, hostname: '127.0.0.1' }) as Server;
  if (!server.listening) await new Promise((resolve) => server.once('listening', resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `http://${host}`, host,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** `GET /weather` costs $0.01 in USDC, paid with x402 v2; the answer is a small JSON forecast. */
export async function startX402Paywall(): Promise<Paywall> {
  let settled = 0;
  const chain: FacilitatorEvmSigner = {
    getAddresses: () => [FACILITATOR],
    getCode: async ({ address }) => (address.toLowerCase() === BASE_SEPOLIA_USDC.toLowerCase() ? '0x6080604052' : '0x'),
    readContract: async () => undefined,
    verifyTypedData: async (args) => verifyTypedData(args as Parameters<typeof verifyTypedData>[0]),
    writeContract: async () => `0x${(++settled).toString(16).padStart(64, '0')}`,
    sendTransaction: async () => `0x${'cd'.repeat(32)}`,
    waitForTransactionReceipt: async () => ({ status: 'success' }),
  };
  const facilitator = new x402Facilitator().register('eip155:84532', new FacilitatorScheme(chain));
  const resourceServer = new x402ResourceServer({
    getSupported: () => facilitator.getSupported(),
    verify: (p: PaymentPayload, r: PaymentRequirements) => facilitator.verify(p, r),
    settle: (p: PaymentPayload, r: PaymentRequirements) => facilitator.settle(p, r),
  } as never).register('eip155:84532', new ServerScheme());
  const app = new Hono();
  app.use(paymentMiddleware({
    'GET /weather': { accepts: { scheme: 'exact', network: 'eip155:84532', price: '$0.01', payTo: X402_PAY_TO }, description: 'Tomorrow\'s weather' },
  }, resourceServer));
  app.get('/weather', (c) => c.json({ city: 'Lisbon', tomorrow: 'sunny', high_c: 21 }));
  return listen((request) => app.fetch(request));
}

/** Every path costs $0.02 in pathUSD, paid with MPP's `tempo.charge`; the answer names the path. */
export async function startMppPaywall(): Promise<Paywall> {
  const getClient = () => createClient({
    chain: tempoModerato,
    transport: custom({
      async request({ method, params }: { method: string; params?: unknown }) {
        if (method === 'eth_call') return '0x';
        if (method === 'eth_chainId') return `0x${tempoModerato.id.toString(16)}`;
        if (method === 'eth_sendRawTransaction') return keccak256((params as [Hex])[0]);
        throw new Error(`the demo's Tempo RPC does not answer ${method}`);
      },
    }),
  });
  const mppx = Mppx.create({
    realm: 'paypolicy-demo',
    secretKey: 'paypolicy-demo-secret-of-at-least-32-bytes',
    methods: [tempo.charge({ recipient: MPP_RECIPIENT, testnet: true, getClient, waitForConfirmation: false })],
  });
  return listen(async (request) => {
    const result = await mppx.charge({ amount: '0.02', description: 'A quote of the day' })(request);
    if (result.status === 402) return result.challenge;
    return result.withReceipt(Response.json({ quote: 'Simplicity is prerequisite for reliability.', path: new URL(request.url).pathname }));
  });
}
