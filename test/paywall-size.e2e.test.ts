import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService, PaymentType } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { MAX_OFFER_BYTES } from '../src/paywalls/oversizedOffer.js';
import { MAX_URL_CHARS } from '../src/paywalls/safeFetch.js';
import { adminFor, createAgent } from './helpers/admin.js';
import { connectClient } from './helpers/clients.js';
import { listAllTransactions, postSign, recoverAuthorizationSigner, rpcPayload, setPolicy } from './helpers/payments.js';
import { PAY_TO, startFetchPeer, v1Requirement, type Peer } from './helpers/peers.js';
import { bearer, expectRpcError } from './helpers/rpc.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

/**
 * A paywall chooses what its challenge holds, and the chosen requirement is kept whole (a payment
 * echoes it): a 240 KB field made every $0.000001 payment write hundreds of kilobytes to the
 * ledger, at 13 MB/s from one agent. A real x402 v1 paywall on 127.0.0.1 serves such a challenge
 * here; quote and sign refuse it with 400 `cannot_price` and write nothing, and an offer just
 * inside the bounds is paid and stored within them. The resource URL, stored with the payment
 * too, is bounded the same way.
 */
const BIG = 'x'.repeat(240 * 1024);
const TOO_LARGE = /^Cannot price a challenge with a field of more than 4096 characters/;

let paywall: Peer;
let s: TestServer;
let agentId: string;

beforeAll(async () => {
  paywall = await startFetchPeer((req) => {
    const url = new URL(req.url);
    const resource = `${url.origin}${url.pathname}`;
    const requirement = url.pathname === '/big-description' ? v1Requirement(resource, '1', { description: BIG })
      : url.pathname === '/big-domain' ? v1Requirement(resource, '1', { extra: { name: `${BIG}${url.search}`, version: '2' } })
        // Every field at the bound, the whole offer just under its own.
        : v1Requirement(resource, '1', { description: 'd'.repeat(4096), mimeType: 'm'.repeat(4096) });
    return new Response(JSON.stringify({ x402Version: 1, error: 'X-PAYMENT header is required', accepts: [requirement] }), {
      status: 402, headers: { 'content-type': 'application/json' },
    });
  });
  s = await startTestServer({ logLevel: 'warn', dev: true, probeAllowHosts: [paywall.host] });
  agentId = await createAgent(adminFor(s), s.bootstrap.org_id, 'size-agent');
  await setPolicy(adminFor(s), agentId, { allowlist: [PAY_TO], capUsd: '10', thresholdUsd: '10' });
});

afterAll(async () => {
  await s?.close();
  await paywall?.close();
});

const sign = (path: string, key?: string) => postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'x402', payload: { resource_url: paywall.url(path) } }, key);

describe('a paywall whose challenge, or a resource URL, is too large to keep', () => {
  test('error: quote and sign answer 400 cannot_price naming the field (REST and Connect); nothing is written', async () => {
    const quote = await rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body: { url: paywall.url('/big-description'), agent_id: agentId }, headers: { connection: 'close' } });
    expect(quote.status, quote.text).toBe(400);
    expect(quote.json.code).toBe('cannot_price');
    expect(quote.json.error).toMatch(TOO_LARGE);
    expect(quote.json.error).toMatch(/\(description\)$/);

    // As one agent would send them: 16 at once, on both fields of the report.
    const signs = await Promise.all(Array.from({ length: 16 }, (_, i) => sign(i % 2 === 0 ? '/big-description' : `/big-domain?${i}`, `big-${i}`)));
    for (const r of signs) {
      expect(r.status, r.text).toBe(400);
      expect(r.json.code).toBe('cannot_price');
      expect(r.json.error).toMatch(TOO_LARGE);
    }
    const rpc = connectClient(PaymentPolicyService, s.url);
    await expectRpcError(rpc.sign({ agentId, type: PaymentType.X402, payload: rpcPayload('x402', { resource_url: paywall.url('/big-description') }), idempotencyKey: 'big-rpc' }, bearer(s.bootstrap.api_key)),
      Code.InvalidArgument, TOO_LARGE);

    expect(await listAllTransactions(adminFor(s), s.bootstrap.org_id, agentId)).toEqual([]);
    // A refused request is not recorded: the same key is a first attempt once the paywall behaves.
    expect(await s.app.deps.store.payments.findByIdempotencyKey(agentId, 'big-0')).toBeUndefined();
  });

  test('error: a resource URL longer than 8192 characters is refused 400 invalid_url before any probe; nothing is written', async () => {
    const before = paywall.requests.length;
    const long = `/at-bound?${'q'.repeat(MAX_URL_CHARS)}`;
    const r = await sign(long, 'long-url');
    expect(r.status, r.text.slice(0, 200)).toBe(400);
    expect(r.json).toEqual({ error: `Invalid URL (longer than ${MAX_URL_CHARS} characters)`, code: 'invalid_url' });
    expect(paywall.requests.length).toBe(before);
    expect(await s.app.deps.store.payments.findByIdempotencyKey(agentId, 'long-url')).toBeUndefined();
  });

  test('behavior: an offer inside the bounds is signed, and what the ledger keeps of it stays within them', async () => {
    const r = await sign('/at-bound', 'at-bound');
    expect(r.status, r.text).toBe(200);
    expect((await recoverAuthorizationSigner(r.json.signature, r.json.authorization)).toLowerCase()).toBe(s.bootstrap.treasury_address.toLowerCase());
    const row = (await s.app.deps.store.payments.get(r.json.transaction_id))!;
    // The request (the request plus the offer) and the result (the payment header echoes the
    // requirement, base64) as stored: bounded by the offer's bound, whatever the paywall sends.
    expect(Buffer.byteLength(row.request)).toBeGreaterThan(8192);
    expect(Buffer.byteLength(row.request)).toBeLessThan(MAX_OFFER_BYTES + 1024);
    expect(Buffer.byteLength(row.result!)).toBeLessThan((MAX_OFFER_BYTES * 4) / 3 + 2048);
  });
});
