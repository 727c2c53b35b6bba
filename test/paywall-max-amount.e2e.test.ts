import type * as grpc from '@grpc/grpc-js';
import type { Client } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService, PaymentType, SignOutcome } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createAgent, type Admin } from './helpers/admin.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { listAllTransactions, postSign, setPolicy } from './helpers/payments.js';
import { BASE_SEPOLIA_USDC, MPP_RECIPIENT, PAY_TO, carriesPayment, startMppPeer, startX402Peer, type MppPeer, type Peer, type X402Peer } from './helpers/peers.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

/**
 * payload.max_amount_usd on x402 and mpp sign requests: the caller's ceiling on the live price.
 * The agent quotes (the quote is cached for 60 s), the paywall then raises its price, and the
 * sign carries the ceiling the agent accepted. The server must refuse before signing or holding
 * anything: a 403 denial with both amounts, a `denied` ledger row, nothing committed against the
 * cap, and no payment ever reaching the paywall. REST, Connect JSON and gRPC.
 */

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let x402: X402Peer;
let mpp: MppPeer;
let s: TestServer;
let admin: Admin;

beforeAll(async () => {
  [x402, mpp] = await Promise.all([startX402Peer(), startMppPeer()]);
  s = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: [x402.host, mpp.host] });
  admin = adminFor(s);
});

afterAll(async () => {
  await s?.close();
  await Promise.all([x402?.close(), mpp?.close()]);
});

let agents = 0;
async function agentWith(allowlist: string[]): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, `max-amount-${++agents}`);
  await setPolicy(admin, agentId, { allowlist, capUsd: '10', thresholdUsd: '1' });
  return agentId;
}

async function ledger(agentId: string) {
  return (await listAllTransactions(admin, s.bootstrap.org_id, agentId)).map((t) => ({ status: t.status, amount: t.amountUsd, type: t.type }));
}

async function committedUsd(agentId: string): Promise<string> {
  const r = await rest(s.url, 'GET', `/api/agents/${agentId}/spend`, { key: s.bootstrap.api_key, headers: { connection: 'close' } });
  expect(r.status, r.text).toBe(200);
  return r.json.committed_usd;
}

const paymentsTo = (peer: Peer, path: string) => peer.requestsTo(path).filter(carriesPayment);

/** Quotes `url` at `before` (cached by the server), then the paywall asks `after`. */
async function quoteThenRaise(agentId: string, url: string, raise: () => void): Promise<void> {
  const q = await rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body: { url, agent_id: agentId }, headers: { connection: 'close' } });
  expect(q.status, q.text).toBe(200);
  expect(q.json.amount_usd).toBe(0.01);
  raise();
}

describe('POST /api/sign payload.max_amount_usd', () => {
  test('error: x402 price rose between quote and sign → 403 with both amounts; nothing signed, held or sent', async () => {
    const agentId = await agentWith([PAY_TO]);
    const path = '/changing?case=rest-rise';
    x402.setPrice('/changing', '$0.01');
    await quoteThenRaise(agentId, x402.url(path), () => x402.setPrice('/changing', '$0.50'));
    const settled = x402.settlements.length;

    const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'x402', payload: { resource_url: x402.url(path), max_amount_usd: '0.10' } });
    expect(r.status, r.text).toBe(403);
    expect(r.json).toEqual({ error: 'Policy denied', reason: "Price of $0.5 exceeds the request's max_amount_usd of $0.1", transaction_id: expect.stringMatching(UUID_RE),
      rule: { kind: 'max_amount', window: null, scope: null, recipient: null, limit: '0.1', spent: null },
    });
    expect(await ledger(agentId)).toEqual([{ status: 'denied', amount: '0.5', type: 'x402' }]);
    expect(await committedUsd(agentId)).toBe('0');
    expect(paymentsTo(x402, path)).toEqual([]);
    expect(x402.settlements).toHaveLength(settled);
  });

  test('behavior: a price equal to the ceiling is signed; without a ceiling the live price is signed as before', async () => {
    const agentId = await agentWith([PAY_TO]);
    x402.setPrice('/changing', '$0.50');
    const at = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'x402', payload: { resource_url: x402.url('/changing?case=equal'), max_amount_usd: 0.5 } });
    expect(at.status, at.text).toBe(200);
    expect(at.json).toMatchObject({ cost_usd: '0.5', payment_header: { name: 'PAYMENT-SIGNATURE' } });
    const none = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'x402', payload: { resource_url: x402.url('/changing?case=none') } });
    expect(none.status, none.text).toBe(200);
    expect(await committedUsd(agentId)).toBe('1');
  });

  test('error: mpp with a JSON-number ceiling below the live price → 403; nothing signed or broadcast', async () => {
    const agentId = await agentWith([MPP_RECIPIENT]);
    const path = '/mpp/paid?case=rest-rise';
    mpp.setAmount('0.01');
    await quoteThenRaise(agentId, mpp.url(path), () => mpp.setAmount('0.25'));
    const broadcasts = mpp.broadcasts.length;
    const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'mpp', payload: { resource_url: mpp.url(path), max_amount_usd: 0.02 } });
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe("Price of $0.25 exceeds the request's max_amount_usd of $0.02");
    expect(await ledger(agentId)).toEqual([{ status: 'denied', amount: '0.25', type: 'mpp' }]);
    expect(await committedUsd(agentId)).toBe('0');
    expect(paymentsTo(mpp, path)).toEqual([]);
    expect(mpp.broadcasts).toHaveLength(broadcasts);
  });

  test('behavior: a dry run reports the same denial and writes nothing', async () => {
    const agentId = await agentWith([PAY_TO]);
    x402.setPrice('/changing', '$0.50');
    const r = await postSign(s.url, s.bootstrap.api_key, {
      agent_id: agentId, type: 'x402', dry_run: true, payload: { resource_url: x402.url('/changing?case=dry'), max_amount_usd: '0.1' },
    });
    expect(r.status, r.text).toBe(403);
    expect(r.json).toMatchObject({ status: 'denied', reason: "Price of $0.5 exceeds the request's max_amount_usd of $0.1" });
    expect(await ledger(agentId)).toEqual([]);
  });

  test('error: the same Idempotency-Key with another ceiling is a conflict, not a replay', async () => {
    const agentId = await agentWith([PAY_TO]);
    x402.setPrice('/changing', '$0.50');
    const body = (max: string) => ({ agent_id: agentId, type: 'x402', payload: { resource_url: x402.url('/changing?case=key'), max_amount_usd: max } });
    expect((await postSign(s.url, s.bootstrap.api_key, body('0.1'), 'max-key')).status).toBe(403);
    const again = await postSign(s.url, s.bootstrap.api_key, body('1'), 'max-key');
    expect(again.status, again.text).toBe(409);
    expect(again.json.code).toBe('idempotency_key_reused');
  });

  test.each([['abc', 'payload.max_amount_usd must be a non-negative decimal number with at most 6 decimal places'], ['0', 'payload.max_amount_usd must be greater than 0']])(
    'error: max_amount_usd %j → 400 invalid_amount, before any probe', async (max, message) => {
      const agentId = await agentWith([PAY_TO]);
      const before = x402.requestsTo('/changing?case=bad').length;
      const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'x402', payload: { resource_url: x402.url('/changing?case=bad'), max_amount_usd: max } });
      expect(r.status, r.text).toBe(400);
      expect(r.json).toEqual({ error: message, code: 'invalid_amount' });
      expect(x402.requestsTo('/changing?case=bad')).toHaveLength(before);
    },
  );
});

describe('PaymentPolicyService.Sign PaywallPayload.max_amount_usd', () => {
  let connect: Client<typeof PaymentPolicyService>;
  let channel: grpc.Client;
  beforeAll(() => {
    connect = connectClient(PaymentPolicyService, s.url);
    channel = grpcChannel(s.url);
  });
  afterAll(() => channel?.close());

  test('error: Connect JSON x402 price rose past the ceiling → DENIED with both amounts; nothing signed or held', async () => {
    const agentId = await agentWith([PAY_TO]);
    const path = '/changing?case=connect-rise';
    x402.setPrice('/changing', '$0.01');
    await quoteThenRaise(agentId, x402.url(path), () => x402.setPrice('/changing', '$0.50'));
    const r = await connect.sign(
      { agentId, type: PaymentType.X402, payload: { case: 'x402', value: { resourceUrl: x402.url(path), maxAmountUsd: '0.1' } } },
      { headers: { authorization: `Bearer ${s.bootstrap.api_key}`, connection: 'close' } },
    );
    expect(r.outcome).toBe(SignOutcome.DENIED);
    expect(r.reason).toBe("Price of $0.5 exceeds the request's max_amount_usd of $0.1");
    expect(r.transactionId).toMatch(UUID_RE);
    expect(r.signature).toBeUndefined();
    expect(r.paymentHeader).toBeUndefined();
    expect(await ledger(agentId)).toEqual([{ status: 'denied', amount: '0.5', type: 'x402' }]);
    expect(await committedUsd(agentId)).toBe('0');
    expect(paymentsTo(x402, path)).toEqual([]);
  });

  test('error: gRPC mpp above the ceiling → DENIED; nothing broadcast', async () => {
    const agentId = await agentWith([MPP_RECIPIENT]);
    const path = '/mpp/paid?case=grpc-rise';
    mpp.setAmount('0.25');
    const r = await grpcUnary(channel, PaymentPolicyService, PaymentPolicyService.method.sign,
      { agentId, type: PaymentType.MPP, payload: { case: 'mpp', value: { resourceUrl: mpp.url(path), maxAmountUsd: '0.2' } } }, s.bootstrap.api_key);
    if (!r.ok) throw new Error(`gRPC Sign failed: ${r.code} ${r.details}`);
    expect(r.message.outcome).toBe(SignOutcome.DENIED);
    expect(r.message.reason).toBe("Price of $0.25 exceeds the request's max_amount_usd of $0.2");
    expect(r.message.paymentHeader).toBeUndefined();
    expect(await committedUsd(agentId)).toBe('0');
    expect(paymentsTo(mpp, path)).toEqual([]);
  });
});

describe('a price larger than the ledger can hold', () => {
  const MAX_UINT256 = (2n ** 256n - 1n).toString();

  test('error: x402 at 2^256−1 atomic units and mpp at $10^20 → 403 denial with its row, on sign and dry run; quote denies; nothing held or paid', async () => {
    const agentId = await agentWith([PAY_TO, MPP_RECIPIENT]);
    x402.setPrice('/changing', { amount: MAX_UINT256, asset: BASE_SEPOLIA_USDC, extra: { name: 'USDC', version: '2' } });
    mpp.setAmount('100000000000000000000');
    const cases = [
      { type: 'x402', url: x402.url('/changing?case=huge') },
      { type: 'mpp', url: mpp.url('/mpp/paid?case=huge') },
    ] as const;
    for (const c of cases) {
      const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: c.type, payload: { resource_url: c.url } });
      expect([c.type, r.status], r.text).toEqual([c.type, 403]);
      expect(r.json).toEqual({ error: 'Policy denied', reason: expect.stringMatching(/larger than the ledger can record/), transaction_id: expect.stringMatching(UUID_RE),
        rule: { kind: 'amount_limit', window: null, scope: null, recipient: null, limit: '1000000000', spent: null },
      });
      const dry = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: c.type, dry_run: true, payload: { resource_url: c.url } });
      expect([c.type, dry.status, dry.json.reason], dry.text).toEqual([c.type, 403, r.json.reason]);
      const q = await rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body: { url: c.url, agent_id: agentId }, headers: { connection: 'close' } });
      expect([c.type, q.status, q.json.status], q.text).toEqual([c.type, 403, 'denied']);
    }
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    // Each row keeps the largest amount the ledger records; its reason names the real price.
    expect(rows.map((t) => [t.type, t.status, t.amountUsd])).toEqual([['mpp', 'denied', '1000000000'], ['x402', 'denied', '1000000000']]);
    expect(await committedUsd(agentId)).toBe('0');
    expect(paymentsTo(x402, '/changing?case=huge')).toEqual([]);
    expect(paymentsTo(mpp, '/mpp/paid?case=huge')).toEqual([]);
  });
});
