import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { x402Facilitator } from '@x402/core/facilitator';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import type { FacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmScheme as ExactEvmServerScheme } from '@x402/evm/exact/server';
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/facilitator';
import { paymentMiddleware, x402ResourceServer } from '@x402/hono';
import { Hono } from 'hono';
import { Mppx, stripe, tempo } from 'mppx/server';
import { createClient, custom, getAddress, keccak256, verifyTypedData, type Address, type Hex } from 'viem';
import { tempoModerato } from 'viem/chains';

/*
 * Real payment peers listening on 127.0.0.1:0 for end-to-end tests through the paypolicy server
 * (shared/protocols/x402.md §12, mpp.md §13):
 *  - an @x402/hono 2.27.0 paywall served by @hono/node-server, whose facilitator is the reference
 *    `x402Facilitator` + `ExactEvmScheme` running in process on a mocked chain;
 *  - a hand-written x402 v1 paywall (JSON-body challenge, x402.md §2) whose payments are checked by
 *    the reference v1 verifier `ExactEvmSchemeV1`;
 *  - an mppx 0.11.0 server behind node:http (IncomingMessage → fetch Request) with a mocked
 *    Tempo RPC.
 * Only the chain is mocked; every protocol check is the reference packages' own. Each peer records
 * every request it receives, so tests can prove that a request never reached it.
 */

export const PAY_TO: Address = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C';
export const MPP_RECIPIENT: Address = '0x742d35Cc6634c0532925a3b844bC9e7595F8fE00';
export const MPP_REALM = 'localhost-test';
export const MPP_SECRET = 'paypolicy-e2e-secret-at-least-32-bytes-long!';
export const BASE_SEPOLIA_USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
/** A token no price table knows: quoting it must fail with "Cannot price …". */
export const UNKNOWN_ASSET: Address = '0x1111111111111111111111111111111111111111';
const FACILITATOR: Address = '0x5555555555555555555555555555555555555555';

/** One request as a peer received it. Header names are lowercase. */
export type PeerRequest = { method: string; path: string; headers: Record<string, string> };

export type Peer = {
  /** `127.0.0.1:<port>`, the form `probeAllowHosts` takes. */
  host: string;
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  url: (path: string) => string;
  /** Every request received, in order. */
  requests: PeerRequest[];
  /** Requests whose path (with query) is exactly `path`. */
  requestsTo: (path: string) => PeerRequest[];
  close: () => Promise<void>;
};

/** True when a request carried any payment credential (x402 v1/v2 or MPP). */
export function carriesPayment(r: PeerRequest): boolean {
  return r.headers['payment-signature'] !== undefined || r.headers['x-payment'] !== undefined
    || (r.headers.authorization ?? '').startsWith('Payment ') || (r.headers['payment-authorization'] ?? '').startsWith('Payment ');
}

function headersOf(h: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  h.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

function peerOf(server: http.Server, requests: PeerRequest[]): Peer {
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    host: `127.0.0.1:${port}`,
    origin,
    url: (path) => `${origin}${path}`,
    requests,
    requestsTo: (path) => requests.filter((r) => r.path === path),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function listening(server: http.Server): Promise<void> {
  return new Promise((resolve, reject) => {
    if (server.listening) return resolve();
    server.once('listening', () => resolve());
    server.once('error', reject);
  });
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'proxy-connection']);

/** node:http request → fetch Request (what mppx handlers take). */
async function toFetchRequest(req: http.IncomingMessage, origin: string): Promise<Request> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!;
    if (!HOP_BY_HOP.has(name.toLowerCase())) headers.append(name, req.rawHeaders[i + 1]!);
  }
  const method = req.method ?? 'GET';
  const body = method === 'GET' || method === 'HEAD' || chunks.length === 0 ? undefined : Buffer.concat(chunks);
  return new Request(new URL(req.url ?? '/', origin), { method, headers, body });
}

/** fetch Response → node:http response. */
async function writeFetchResponse(res: http.ServerResponse, response: Response): Promise<void> {
  const headers: Array<[string, string]> = [];
  response.headers.forEach((value, name) => {
    if (!HOP_BY_HOP.has(name) && name !== 'content-length') headers.push([name, value]);
  });
  const body = Buffer.from(await response.arrayBuffer());
  res.writeHead(response.status, [...headers.flat(), 'content-length', String(body.length)]);
  res.end(body);
}

/**
 * A node:http server on 127.0.0.1:0 that hands each request to a fetch-style handler and
 * records it first.
 */
export async function startFetchPeer(handle: (req: Request) => Response | Promise<Response>): Promise<Peer> {
  const requests: PeerRequest[] = [];
  let origin = '';
  const server = http.createServer((req, res) => {
    void (async () => {
      try {
        const request = await toFetchRequest(req, origin);
        const url = new URL(request.url);
        requests.push({ method: request.method, path: `${url.pathname}${url.search}`, headers: headersOf(request.headers) });
        await writeFetchResponse(res, await handle(request));
      } catch (err) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`peer error: ${(err as Error).message}`);
      }
    })();
  });
  server.listen(0, '127.0.0.1');
  await listening(server);
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return peerOf(server, requests);
}

/** A paywall that holds every request until released: a slow or hung paywall, counted. */
export type HeldPeer = {
  peer: Peer;
  /** Requests received so far (held, or answered after the release). */
  parked: () => number;
  /** Resolves once `n` requests have arrived. */
  reached: (n: number) => Promise<void>;
  /** Lets every held request, and every later one, be answered by `answer`. */
  release: () => void;
};

/** Starts a paywall that parks every request until `release`, then answers it with `answer`. */
export async function startHeldPeer(answer: (req: Request) => Response | Promise<Response>): Promise<HeldPeer> {
  let parked = 0;
  let wake: (() => void) | undefined;
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const peer = await startFetchPeer(async (req) => {
    parked++;
    wake?.();
    await released;
    return answer(req);
  });
  return {
    peer,
    parked: () => parked,
    async reached(n) {
      while (parked < n) await new Promise<void>((r) => (wake = r));
    },
    release,
  };
}

// ---------------------------------------------------------------------------------------------
// x402

/** A mocked EVM chain for the reference facilitators: the asset has code, payers are EOAs. */
export function mockEvmChain(asset: Address = BASE_SEPOLIA_USDC): { signer: FacilitatorEvmSigner; writes: unknown[] } {
  const writes: unknown[] = [];
  const signer: FacilitatorEvmSigner = {
    getAddresses: () => [FACILITATOR],
    getCode: async ({ address }) => (address.toLowerCase() === asset.toLowerCase() ? '0x6080604052' : '0x'),
    readContract: async () => undefined,
    verifyTypedData: async (args) => verifyTypedData(args as Parameters<typeof verifyTypedData>[0]),
    writeContract: async (args) => {
      writes.push(args);
      return `0x${(writes.length).toString(16).padStart(64, '0')}`;
    },
    sendTransaction: async () => `0x${'cd'.repeat(32)}`,
    waitForTransactionReceipt: async () => ({ status: 'success' }),
  };
  return { signer, writes };
}

type Price = string | { amount: string; asset: string; extra?: Record<string, unknown> };

export type X402Peer = Peer & {
  /** Sets the price of one route (`/paid`, `/changing`, …); defaults to `$0.01`. */
  setPrice: (path: string, price: Price) => void;
  /** Transactions the in-process facilitator settled (writeContract calls). */
  settlements: unknown[];
};

/**
 * Where a peer sends a request instead of answering it: a `Location` for a 302, or null to answer
 * normally. Lets tests put an open redirect anywhere on a paywall's origin.
 */
export type RedirectRule = (url: URL) => string | null;

/** The open redirect tests use: `…/go?to=<location>` answers 302 to `<location>`. */
export const openRedirect: RedirectRule = (url) => (url.pathname.endsWith('/go') ? url.searchParams.get('to') : null);

function redirectResponse(location: string): Response {
  return new Response(null, { status: 302, headers: { location } });
}

/** Paths of the v2 paywall. `/post-only` answers 405 to GET and 402 to POST. */
export const X402_GET_ROUTES = ['/paid', '/svc/paid', '/changing', '/approval', '/unknown-asset'] as const;

/**
 * An @x402/hono 2.27.0 paywall on Base Sepolia, with the reference facilitator in process:
 * `GET /paid` and friends cost $0.01 (see setPrice), `GET /free` is free, `/post-only` is paid
 * by POST only, `GET /unknown-asset` asks for a token nobody can price.
 */
export async function startX402Peer(options: { payTo?: Address; redirect?: RedirectRule } = {}): Promise<X402Peer> {
  const chain = mockEvmChain();
  const facilitator = new x402Facilitator().register('eip155:84532', new ExactEvmFacilitatorScheme(chain.signer));
  const facilitatorClient = {
    getSupported: () => facilitator.getSupported(),
    verify: (p: PaymentPayload, r: PaymentRequirements) => facilitator.verify(p, r),
    settle: (p: PaymentPayload, r: PaymentRequirements) => facilitator.settle(p, r),
  };
  const resourceServer = new x402ResourceServer(facilitatorClient as never).register('eip155:84532', new ExactEvmServerScheme());

  const prices = new Map<string, Price>([['/unknown-asset', { amount: '10000', asset: UNKNOWN_ASSET, extra: { name: 'Mystery', version: '1' } }]]);
  const priceOf = (path: string) => () => prices.get(path) ?? '$0.01';
  const accepts = (path: string) => ({ scheme: 'exact', network: 'eip155:84532' as const, price: priceOf(path), payTo: options.payTo ?? PAY_TO });
  const routes: Record<string, { accepts: ReturnType<typeof accepts>; description: string }> = {};
  for (const path of X402_GET_ROUTES) routes[`GET ${path}`] = { accepts: accepts(path), description: `demo ${path}` };
  routes['POST /post-only'] = { accepts: accepts('/post-only'), description: 'demo /post-only' };

  const app = new Hono();
  app.use(paymentMiddleware(routes, resourceServer));
  for (const path of X402_GET_ROUTES) app.get(path, (c) => c.json({ ok: true, path }));
  app.get('/post-only', (c) => c.text('use POST', 405));
  app.post('/post-only', (c) => c.json({ ok: true, path: '/post-only' }));
  app.get('/free', (c) => c.json({ free: true }));

  const requests: PeerRequest[] = [];
  const server = serve({
    fetch: (request: Request) => {
      const url = new URL(request.url);
      requests.push({ method: request.method, path: `${url.pathname}${url.search}`, headers: headersOf(request.headers) });
      const location = options.redirect?.(url) ?? null;
      return location !== null ? redirectResponse(location) : app.fetch(request);
    },
    port: 0,
    hostname: '127.0.0.1',
  }) as http.Server;
  await listening(server);
  return {
    ...peerOf(server, requests),
    setPrice: (path, price) => void prices.set(path, price),
    settlements: chain.writes,
  };
}

/** A v1 requirement as x402-express 1.2.0 would emit it (x402.md §2), for `resource`, with any field replaced. */
export function v1Requirement(resource: string, maxAmountRequired = '10000', overrides: Record<string, unknown> = {}) {
  return {
    scheme: 'exact', network: 'base-sepolia', maxAmountRequired, resource, description: 'v1 demo', mimeType: '',
    payTo: PAY_TO, maxTimeoutSeconds: 60, asset: BASE_SEPOLIA_USDC, extra: { name: 'USDC', version: '2' },
    ...overrides,
  };
}

export type PlainPeer = Peer & {
  /** Results of the reference v1 verifier for each X-PAYMENT received on `/v1/paid`. */
  v1Verifications: Array<{ isValid: boolean; invalidReason?: string; payer?: string }>;
};

/**
 * A hand-written node:http peer:
 *  - `GET /v1/paid`: x402 v1 JSON-body 402 on base-sepolia ($0.01); an `X-PAYMENT` is checked with
 *    the reference `ExactEvmSchemeV1` (verify, then settle on the mocked chain) and answered with
 *    200 + `X-PAYMENT-RESPONSE`, or 402 with the verifier's reason;
 *  - `GET /ok`: 200, no challenge;
 *  - `GET /garbage`: 402 in neither x402 nor MPP format.
 */
export async function startPlainPeer(): Promise<PlainPeer> {
  const chain = mockEvmChain();
  const v1 = new ExactEvmSchemeV1(chain.signer);
  const v1Verifications: PlainPeer['v1Verifications'] = [];
  const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

  const peer = await startFetchPeer(async (req) => {
    const url = new URL(req.url);
    if (url.pathname === '/ok') return json(200, { ok: true });
    if (url.pathname === '/garbage') return new Response('pay me, somehow', { status: 402, headers: { 'content-type': 'text/plain' } });
    if (url.pathname !== '/v1/paid') return new Response('not found', { status: 404 });
    const requirement = v1Requirement(`${url.origin}${url.pathname}`);
    const sent = req.headers.get('x-payment');
    if (sent === null) return json(402, { x402Version: 1, error: 'X-PAYMENT header is required', accepts: [requirement] });
    let payload: PaymentPayload;
    try {
      payload = JSON.parse(Buffer.from(sent, 'base64').toString('utf8')) as PaymentPayload;
    } catch {
      return json(402, { x402Version: 1, error: 'invalid X-PAYMENT', accepts: [requirement] });
    }
    const requirements = requirement as unknown as PaymentRequirements;
    const verified = await v1.verify(payload, requirements);
    v1Verifications.push({ isValid: verified.isValid, invalidReason: verified.invalidReason, payer: verified.payer });
    if (!verified.isValid) return json(402, { x402Version: 1, error: verified.invalidReason, accepts: [requirement] });
    const settled = await v1.settle(payload, requirements);
    const response = Buffer.from(JSON.stringify(settled)).toString('base64');
    return json(200, { ok: true, path: url.pathname }, { 'x-payment-response': response });
  });
  return { ...peer, v1Verifications };
}

// ---------------------------------------------------------------------------------------------
// MPP

export type MppPeer = Peer & {
  /** Sets the tempo/charge amount in USD (human units, e.g. `'0.01'`). */
  setAmount: (amount: string) => void;
  /** Sets the tempo/charge splits (amounts in USD human units) of every later challenge. */
  setSplits: (splits: Array<{ amount: string; recipient: Address }>) => void;
  /** Raw transactions the mocked Tempo RPC was asked to broadcast. */
  broadcasts: Hex[];
};

/**
 * mppx 0.11.0 with `tempo.charge` on Tempo testnet (pathUSD, $0.01 by default) behind node:http.
 * Every path is paywalled. The chain RPC is mocked: `eth_call` succeeds and
 * `eth_sendRawTransaction` answers with the transaction's keccak256. With `stripeOnly`, the
 * server offers only `stripe/charge` (issued offline with a dummy secret key).
 */
export async function startMppPeer(
  options: {
    realm?: string; stripeOnly?: boolean; splits?: Array<{ amount: string; recipient: Address }>; recipient?: Address; redirect?: RedirectRule;
    /** Rewrites the 402's `WWW-Authenticate` value, for challenges mppx itself would not send. */
    rewriteChallenge?: (wwwAuthenticate: string) => string;
  } = {},
): Promise<MppPeer> {
  const broadcasts: Hex[] = [];
  const getClient = () =>
    createClient({
      chain: tempoModerato,
      transport: custom({
        async request({ method, params }: { method: string; params?: unknown }) {
          if (method === 'eth_call') return '0x';
          if (method === 'eth_chainId') return `0x${tempoModerato.id.toString(16)}`;
          if (method === 'eth_sendRawTransaction') {
            const raw = (params as [Hex])[0];
            broadcasts.push(raw);
            return keccak256(raw);
          }
          throw new Error(`unmocked RPC ${method}`);
        },
      }),
    });
  const realm = options.realm ?? MPP_REALM;
  let amount = '0.01';
  let splits = options.splits;
  const mppx = options.stripeOnly
    ? Mppx.create({
      realm,
      secretKey: MPP_SECRET,
      methods: [stripe.charge({ secretKey: 'sk_test_dummy', networkId: 'acct_test', paymentMethodTypes: ['card'], currency: 'usd', decimals: 2 })],
    })
    : Mppx.create({
      realm,
      secretKey: MPP_SECRET,
      methods: [tempo.charge({
        recipient: options.recipient ?? MPP_RECIPIENT, testnet: true, getClient, waitForConfirmation: false,
        ...(splits ? { splits } : {}),
      })],
    });
  const peer = await startFetchPeer(async (request) => {
    const location = options.redirect?.(new URL(request.url)) ?? null;
    if (location !== null) return redirectResponse(location);
    const charge = options.stripeOnly ? { amount: '1' } : { amount, description: 'test item', ...(splits ? { splits } : {}) };
    const result = await mppx.charge(charge)(request);
    if (result.status === 402) {
      const rewrite = options.rewriteChallenge;
      if (!rewrite) return result.challenge;
      const headers = new Headers(result.challenge.headers);
      headers.set('www-authenticate', rewrite(headers.get('www-authenticate') ?? ''));
      return new Response(await result.challenge.text(), { status: 402, headers });
    }
    return result.withReceipt(Response.json({ ok: true, path: new URL(request.url).pathname }));
  });
  return { ...peer, setAmount: (a) => void (amount = a), setSplits: (next) => void (splits = next), broadcasts };
}

/** Checksummed form of an address, for comparisons with wire values. */
export const checksum = (a: string): Address => getAddress(a.toLowerCase());

/** A TCP port on 127.0.0.1 that nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  server.listen(0, '127.0.0.1');
  await listening(server);
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
