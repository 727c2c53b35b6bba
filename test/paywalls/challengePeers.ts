import { ExactEvmScheme } from '@x402/evm/exact/server';
import { UptoEvmScheme } from '@x402/evm/upto/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/hono';
import { Hono } from 'hono';
import { Mppx, stripe, tempo } from 'mppx/server';
import { createClient, custom } from 'viem';
import { tempo as tempoMainnet, tempoModerato } from 'viem/chains';
import type { ProbeResult } from '../../src/paywalls/offer.js';

/*
 * The protocols' own server packages as offline 402 sources (shared/protocols/x402.md §12,
 * mpp.md §13). Issuing a challenge needs no chain access; verify/settle/RPC throw so that a test
 * which accidentally pays fails loudly.
 */

export const PAY_TO = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C';
export const MPP_RECIPIENT = '0x742d35Cc6634c0532925a3b844bC9e7595F8fE00';
export const MPP_SECRET = 'paypolicy-test-secret-at-least-32-bytes-long';
export const RESOURCE_URL = 'http://example.test/paid';

/** Converts a fetch Response into what the parsers consume: lowercase header map, body bytes. */
export async function toProbe(res: Response, url = RESOURCE_URL): Promise<ProbeResult> {
  const headers: Record<string, string> = {};
  // Headers.forEach yields lowercase names with repeated lines already joined by ", ".
  res.headers.forEach((value, name) => {
    headers[name] = value;
  });
  return { status: res.status, headers, body: Buffer.from(await res.arrayBuffer()), url };
}

type X402Accept = {
  scheme: string;
  network: `${string}:${string}`;
  price: string | { amount: string; asset: string; extra?: Record<string, unknown> };
  payTo: string;
  maxTimeoutSeconds?: number;
};

/** A hono app whose `GET /paid` is protected by @x402/hono 2.27.0 with an in-process facilitator. */
export function x402App(accepts: X402Accept[], description = 'demo'): Hono {
  const kinds = [...new Map(accepts.map((a) => [`${a.scheme} ${a.network}`, a])).values()];
  const facilitator = {
    getSupported: async () => ({
      kinds: kinds.map(({ scheme, network }) => ({ x402Version: 2, scheme, network })),
      extensions: [],
      signers: {},
    }),
    verify: async (): Promise<never> => {
      throw new Error('verify must not run in challenge tests');
    },
    settle: async (): Promise<never> => {
      throw new Error('settle must not run in challenge tests');
    },
  };
  const server = new x402ResourceServer(facilitator);
  for (const { scheme, network } of kinds) server.register(network, scheme === 'upto' ? new UptoEvmScheme() : new ExactEvmScheme());
  const app = new Hono();
  app.use(paymentMiddleware({ 'GET /paid': { accepts, description } }, server));
  app.get('/paid', (c) => c.json({ ok: true }));
  return app;
}

/** Requests `GET /paid` from an x402 app the way paypolicy probes: JSON, non-browser UA. */
export async function x402Challenge(app: Hono): Promise<Response> {
  return app.request(RESOURCE_URL, { headers: { accept: 'application/json', 'user-agent': 'paypolicy-test' } });
}

/** A viem client for Tempo whose RPC always fails: issuing challenges must not touch the chain. */
function offlineTempoClient({ chainId }: { chainId?: number }) {
  return createClient({
    chain: chainId === 42431 ? tempoModerato : tempoMainnet,
    transport: custom({
      request: async () => {
        throw new Error('no RPC in challenge tests');
      },
    }),
  });
}

type TempoOptions = {
  testnet?: boolean;
  chainId?: number;
  currency?: `0x${string}`;
};

/** mppx 0.11.0 with one tempo.charge method (testnet pathUSD unless told otherwise). */
export function mppTempo(options: TempoOptions = { testnet: true }, realm = 'localhost-test') {
  return Mppx.create({
    realm,
    secretKey: MPP_SECRET,
    methods: [
      tempo.charge({
        recipient: MPP_RECIPIENT,
        getClient: offlineTempoClient,
        waitForConfirmation: false,
        ...options,
      }),
    ],
  });
}

/** mppx 0.11.0 offering stripe first and tempo (testnet) second: one comma-joined header. */
export function mppStripeAndTempo(realm = 'localhost-test') {
  return Mppx.create({
    realm,
    secretKey: MPP_SECRET,
    methods: [
      stripe.charge({ secretKey: 'sk_test_dummy', networkId: 'acct_test', paymentMethodTypes: ['card'], currency: 'usd', decimals: 2 }),
      tempo.charge({ recipient: MPP_RECIPIENT, testnet: true, getClient: offlineTempoClient, waitForConfirmation: false }),
    ],
  });
}

/** mppx 0.11.0 offering stripe only. */
export function mppStripeOnly(realm = 'localhost-test') {
  return Mppx.create({
    realm,
    secretKey: MPP_SECRET,
    methods: [stripe.charge({ secretKey: 'sk_test_dummy', networkId: 'acct_test', paymentMethodTypes: ['card'], currency: 'usd', decimals: 2 })],
  });
}

/** Unwraps an mppx handler result that must be a 402. */
export function challengeOf(result: { status: number; challenge?: Response }): Response {
  if (result.status !== 402 || result.challenge === undefined) throw new Error(`expected a 402, got ${result.status}`);
  return result.challenge;
}

/** Decodes standard base64 JSON, as the tests' independent reading of a `payment-required` header. */
export function decodeBase64Json(value: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(value, 'base64').toString('utf8')) as Record<string, unknown>;
}

/** Encodes JSON as standard base64 (the `payment-required` encoding). */
export function encodeBase64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64');
}

/** Encodes JSON as base64url without padding (the MPP `request` encoding). */
export function encodeBase64UrlJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}
