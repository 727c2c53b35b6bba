import type * as grpc from '@grpc/grpc-js';
import type { Client } from '@connectrpc/connect';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/facilitator';
import { Receipt } from 'mppx';
import { getAddress, keccak256, type Address, type Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../gen/paypolicy/v1/admin_pb.js';
import { ApprovalStatus, PaymentPolicyService, PaymentType, SignOutcome } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createAgent, upsertService, type Admin } from './helpers/admin.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { getApprovalStatus, listAllTransactions, postSign, recoverAuthorizationSigner, setPolicy, type SignBody } from './helpers/payments.js';
import {
  BASE_SEPOLIA_USDC,
  MPP_REALM,
  MPP_RECIPIENT,
  PAY_TO,
  carriesPayment,
  mockEvmChain,
  startMppPeer,
  startPlainPeer,
  startX402Peer,
  v1Requirement,
  type MppPeer,
  type Peer,
  type PlainPeer,
  type X402Peer,
} from './helpers/peers.js';
import { startTestServer, type RestResult, type TestServer } from './helpers/server.js';

/**
 * POST /api/sign with types x402 and mpp end to end: the real paypolicy server probes real
 * paywalls on 127.0.0.1 at sign time, derives recipient and amount from the live challenge, signs,
 * and returns the header the agent must send. The core proof is that the same paywall then
 * answers 200 to that header: @x402/hono 2.27.0 with the reference facilitator in process (v2),
 * the reference v1 verifier ExactEvmSchemeV1 (v1), and mppx 0.11.0 with a mocked Tempo RPC.
 */

const STRANGER: Address = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const BLOCKED = 'URL is not allowed (private/loopback hosts blocked)';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const SIG_RE = /^0x[0-9a-f]{130}$/;

let x402: X402Peer;
let plain: PlainPeer;
let mpp: MppPeer;
let s: TestServer;
let defaults: TestServer;
let admin: Admin;
let treasury: Address;

beforeAll(async () => {
  [x402, plain, mpp] = await Promise.all([startX402Peer(), startPlainPeer(), startMppPeer()]);
  [s, defaults] = await Promise.all([
    startTestServer({ dev: true, probeAllowHosts: [x402.host, plain.host, mpp.host] }),
    startTestServer(),
  ]);
  admin = adminFor(s);
  treasury = getAddress(s.bootstrap.treasury_address);
  await upsertService(admin, { slug: 'sign-weather', name: 'Weather API', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }] });
  await upsertService(admin, { slug: 'sign-mpp', name: 'MPP Service', paymentMethods: [{ realm: MPP_REALM, baseUrl: mpp.url('/good'), protocol: 'mpp' }] });
});

afterAll(async () => {
  await Promise.all([s?.close(), defaults?.close()]);
  await Promise.all([x402?.close(), plain?.close(), mpp?.close()]);
});

let agentCount = 0;
async function agentWith(policy: { allowlist: string[]; cap?: string; threshold?: string }): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, `sign-e2e-${++agentCount}`);
  await setPolicy(admin, agentId, { allowlist: policy.allowlist, capUsd: policy.cap ?? '10', thresholdUsd: policy.threshold ?? '1' });
  return agentId;
}

/** A paywall sign request with a bogus recipient and amount, which the server must ignore. */
function paywallBody(agentId: string, type: 'x402' | 'mpp', resourceUrl: string, extra: Partial<SignBody> = {}): SignBody {
  return { agent_id: agentId, type, chain_id: 8453, recipient_address: STRANGER, amount_usd: 0.5, payload: { resource_url: resourceUrl }, ...extra };
}

function sign(body: SignBody, idempotencyKey?: string, server: TestServer = s, key: string = server.bootstrap.api_key): Promise<RestResult> {
  return postSign(server.url, key, body, idempotencyKey);
}

/** Sends the header from a 200 to the paywall, as the agent would. */
function present(url: string, header: { name: string; value: string }, method = 'GET'): Promise<Response> {
  return fetch(url, { method, headers: { accept: 'application/json', 'user-agent': 'agent-under-test', [header.name]: header.value } });
}

function decodeBase64Json(value: string): any {
  expect(value).toMatch(/^[A-Za-z0-9+/]*={0,2}$/);
  return JSON.parse(Buffer.from(value, 'base64').toString('utf8'));
}

function paymentAttempts(peer: Peer, path: string) {
  return peer.requestsTo(path).filter(carriesPayment);
}

/** Ledger rows of one agent as [status, amount, recipient] triples. */
async function ledger(agentId: string) {
  const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
  return rows.map((t) => ({ status: t.status, amount: t.amountUsd, recipient: t.recipientAddress.toLowerCase(), chainId: t.chainId, slug: t.serviceSlug, type: t.type }));
}

describe('POST /api/sign type x402 against an @x402/hono 2.27.0 paywall (v2)', () => {
  test('behavior: recipient and amount come from the challenge; the payment_header makes the paywall answer 200', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/paid');
    const settledBefore = x402.settlements.length;
    const r = await sign(paywallBody(agentId, 'x402', url));
    expect(r.status, r.text).toBe(200);
    const b = r.json;
    expect(b).toEqual({
      signature: expect.stringMatching(SIG_RE),
      tx_hash: null,
      agent_id: agentId,
      cost_usd: '0.01',
      transaction_id: expect.stringMatching(UUID_RE),
      idempotent: false,
      type: 'x402',
      chain_id: 84532,
      recipient_address: PAY_TO,
      resource_url: url,
      authorization: {
        from: treasury, to: PAY_TO, value: '10000', valid_after: '0', valid_before: expect.stringMatching(/^\d+$/),
        nonce: expect.stringMatching(/^0x[0-9a-f]{64}$/), token: BASE_SEPOLIA_USDC, domain_name: 'USDC', domain_version: '2', chain_id: 84532,
      },
      payment_header: { name: 'PAYMENT-SIGNATURE', value: expect.any(String) },
    });
    expect(await recoverAuthorizationSigner(b.signature, b.authorization)).toBe(treasury);

    // The header echoes the live requirement verbatim and carries the signed authorization.
    const challenge = await fetch(url, { headers: { accept: 'application/json' } });
    const required = decodePaymentRequiredHeader(challenge.headers.get('payment-required')!);
    const sent = decodeBase64Json(b.payment_header.value);
    expect(sent.x402Version).toBe(2);
    expect(sent.accepted).toEqual(required.accepts[0]);
    expect(sent.payload.signature).toBe(b.signature);
    expect(sent.payload.authorization).toEqual({
      from: treasury, to: PAY_TO, value: '10000', validAfter: '0', validBefore: b.authorization.valid_before, nonce: b.authorization.nonce,
    });

    // The core proof: the same paywall accepts it, verifies with the reference facilitator and settles.
    const paid = await present(url, b.payment_header);
    expect(paid.status, await paid.clone().text()).toBe(200);
    expect(await paid.json()).toEqual({ ok: true, path: '/paid' });
    const settled = decodePaymentResponseHeader(paid.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: true, network: 'eip155:84532', payer: treasury });
    expect(x402.settlements).toHaveLength(settledBefore + 1);

    expect(await ledger(agentId)).toEqual([{ status: 'signed', amount: '0.01', recipient: PAY_TO.toLowerCase(), chainId: 84532, slug: '', type: 'x402' }]);
  });

  test('behavior: a tampered payment_header is refused by the paywall (the proof is not vacuous)', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/paid?case=tamper');
    const r = await sign(paywallBody(agentId, 'x402', url));
    expect(r.status, r.text).toBe(200);
    const sent = decodeBase64Json(r.json.payment_header.value);
    sent.payload.authorization.nonce = `0x${'00'.repeat(32)}`;
    const value = Buffer.from(JSON.stringify(sent)).toString('base64');
    const refused = await present(url, { name: 'PAYMENT-SIGNATURE', value });
    expect(refused.status).toBe(402);
    expect(decodePaymentRequiredHeader(refused.headers.get('payment-required')!).error).toBe('invalid_exact_evm_signature');
  });

  test('error: over the cap → 403 before anything is signed; the paywall never sees a payment', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], cap: '0.005', threshold: '0.001' });
    const path = '/paid?case=cap';
    const settledBefore = x402.settlements.length;
    const r = await sign(paywallBody(agentId, 'x402', x402.url(path)));
    expect(r.status, r.text).toBe(403);
    expect(r.json).toEqual({
      error: 'Policy denied',
      reason: 'Spend cap of $0.005 per 24 hours would be exceeded: $0 already committed, this payment is $0.01 ($0.005 left)',
      transaction_id: expect.stringMatching(UUID_RE),
      rule: { kind: 'spend_cap', window: '24h', scope: 'agent', recipient: null, limit: '0.005', spent: '0' },
    });
    expect(x402.requestsTo(path)).toHaveLength(1); // the sign-time probe only
    expect(paymentAttempts(x402, path)).toEqual([]);
    expect(x402.settlements).toHaveLength(settledBefore);
    const rows = await ledger(agentId);
    expect(rows).toEqual([{ status: 'denied', amount: '0.01', recipient: PAY_TO.toLowerCase(), chainId: 84532, slug: '', type: 'x402' }]);
    expect(rows.filter((t) => t.status === 'signed')).toEqual([]);
  });

  test('error: an unlisted recipient → 403; nothing signed, no payment sent', async () => {
    const agentId = await agentWith({ allowlist: [STRANGER] });
    const path = '/paid?case=unlisted';
    const r = await sign(paywallBody(agentId, 'x402', x402.url(path)));
    expect(r.status, r.text).toBe(403);
    // The client's recipient_address (STRANGER, which is allowlisted) is not what is checked.
    expect(r.json).toMatchObject({ error: 'Policy denied', reason: `Recipient ${PAY_TO.toLowerCase()} is not on the agent's allowlist` });
    expect(r.json.payment_header).toBeUndefined();
    expect(paymentAttempts(x402, path)).toEqual([]);
    expect((await ledger(agentId)).map((t) => t.status)).toEqual(['denied']);
  });

  test('behavior: an idempotent replay returns the same payment_header', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/paid?case=replay');
    const first = await sign(paywallBody(agentId, 'x402', url), 'replay-1');
    expect(first.status, first.text).toBe(200);
    const again = await sign(paywallBody(agentId, 'x402', url), 'replay-1');
    expect(again.status, again.text).toBe(200);
    expect(again.json).toEqual({ ...first.json, idempotent: true });
    expect(again.json.payment_header).toEqual(first.json.payment_header);
    expect((await ledger(agentId)).map((t) => t.status)).toEqual(['signed']);
    const paid = await present(url, again.json.payment_header);
    expect(paid.status, await paid.clone().text()).toBe(200);
  });

  test('behavior: above the threshold → 202 → APPROVE → the repeat gets a fresh header the paywall accepts', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], threshold: '0.005' });
    const url = x402.url('/approval');
    const pending = await sign(paywallBody(agentId, 'x402', url), 'approval-1');
    expect(pending.status, pending.text).toBe(202);
    expect(pending.json).toEqual({
      status: 'pending_approval',
      reason: 'Amount $0.01 exceeds the approval threshold of 0.005 USD; a human must approve it',
      transaction_id: expect.stringMatching(UUID_RE),
      approval_request_id: expect.stringMatching(UUID_RE),
      rule: { kind: 'approval_threshold', window: null, scope: 'agent', recipient: null, limit: '0.005', spent: null },
    });
    expect(paymentAttempts(x402, '/approval')).toEqual([]);
    // Repeating before a decision stays pending.
    const still = await sign(paywallBody(agentId, 'x402', url), 'approval-1');
    expect(still.status).toBe(202);
    expect(still.json.approval_request_id).toBe(pending.json.approval_request_id);

    const decided = await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE, note: 'ok' }, admin.auth);
    expect(decided.approval?.status).toBe(ApprovalStatus.APPROVED);
    const status = await getApprovalStatus(s.url, s.bootstrap.api_key, pending.json.approval_request_id);
    expect(status.json).toMatchObject({ status: 'approved', transaction_id: pending.json.transaction_id });

    const collectedAt = Math.floor(Date.now() / 1000);
    const done = await sign(paywallBody(agentId, 'x402', url), 'approval-1');
    expect(done.status, done.text).toBe(200);
    expect(done.json).toMatchObject({
      transaction_id: pending.json.transaction_id, cost_usd: '0.01', recipient_address: PAY_TO, chain_id: 84532, type: 'x402', resource_url: url,
      payment_header: { name: 'PAYMENT-SIGNATURE' },
    });
    expect(done.json.signature).toMatch(SIG_RE);
    // Signed at collection, not at request time: the window starts now.
    expect(Number(done.json.authorization.valid_before)).toBeGreaterThanOrEqual(collectedAt + 30);
    expect(await recoverAuthorizationSigner(done.json.signature, done.json.authorization)).toBe(treasury);

    const paid = await present(url, done.json.payment_header);
    expect(paid.status, await paid.clone().text()).toBe(200);
    expect(decodePaymentResponseHeader(paid.headers.get('payment-response')!)).toMatchObject({ success: true, payer: treasury });
    expect((await ledger(agentId)).map((t) => t.status)).toEqual(['signed']);

    // Collected once: a further repeat replays the same header.
    const replay = await sign(paywallBody(agentId, 'x402', url), 'approval-1');
    expect(replay.status).toBe(200);
    expect(replay.json.payment_header).toEqual(done.json.payment_header);
  });

  test('error: the paywall raised its price between approval and collection → 403 "offer changed"', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], threshold: '0.005' });
    const url = x402.url('/changing');
    const pending = await sign(paywallBody(agentId, 'x402', url), 'changing-1');
    expect(pending.status, pending.text).toBe(202);
    await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE }, admin.auth);
    x402.setPrice('/changing', '$0.02');
    try {
      const settledBefore = x402.settlements.length;
      const r = await sign(paywallBody(agentId, 'x402', url), 'changing-1');
      expect(r.status, r.text).toBe(403);
      expect(r.json).toMatchObject({ error: 'Policy denied', transaction_id: pending.json.transaction_id });
      expect(r.json.reason).toMatch(/offer changed/);
      expect(r.json.payment_header).toBeUndefined();
      expect(paymentAttempts(x402, '/changing')).toEqual([]);
      expect(x402.settlements).toHaveLength(settledBefore);
      expect((await ledger(agentId)).map((t) => t.status)).toEqual(['denied']);
      // The refusal sticks: the same key does not get a signature later.
      x402.setPrice('/changing', '$0.01');
      const again = await sign(paywallBody(agentId, 'x402', url), 'changing-1');
      expect(again.status).toBe(403);
    } finally {
      x402.setPrice('/changing', '$0.01');
    }
  });

  test('behavior: dry_run returns the verdict from the live challenge without signing or persisting', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], threshold: '0.005' });
    const allowedAgent = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/paid?case=dry');
    const ok = await sign(paywallBody(allowedAgent, 'x402', url, { dry_run: true }));
    expect(ok.status, ok.text).toBe(200);
    expect(ok.json).toEqual({ dry_run: true, status: 'allowed', agent_id: allowedAgent, type: 'x402', chain_id: 84532, recipient_address: PAY_TO, amount_usd: 0.01 });
    const pending = await sign(paywallBody(agentId, 'x402', url, { dry_run: true }));
    expect(pending.status, pending.text).toBe(202);
    expect(pending.json).toMatchObject({ dry_run: true, status: 'pending_approval', approval_threshold_usd: 0.005, recipient_address: PAY_TO, amount_usd: 0.01 });
    expect(await ledger(agentId)).toEqual([]);
    expect(await ledger(allowedAgent)).toEqual([]);
    expect(paymentAttempts(x402, '/paid?case=dry')).toEqual([]);
  });

  test('behavior: a slug-allowlisted service is paid; the ledger records the attribution', async () => {
    const agentId = await agentWith({ allowlist: ['sign-weather'] });
    const url = x402.url('/svc/paid');
    const r = await sign(paywallBody(agentId, 'x402', url));
    expect(r.status, r.text).toBe(200);
    expect(r.json.recipient_address).toBe(PAY_TO);
    expect((await present(url, r.json.payment_header)).status).toBe(200);
    expect(await ledger(agentId)).toEqual([{ status: 'signed', amount: '0.01', recipient: PAY_TO.toLowerCase(), chainId: 84532, slug: 'sign-weather', type: 'x402' }]);
  });

  // The approval re-check keeps the payment's registry attribution: without it, a payment allowed
  // only through a service slug could never be approved.
  test('behavior: a slug-allowlisted payment above the threshold can be approved and collected', async () => {
    const agentId = await agentWith({ allowlist: ['sign-weather'], threshold: '0.005' });
    const url = x402.url('/svc/paid?case=slug-approval');
    const pending = await sign(paywallBody(agentId, 'x402', url), 'slug-approval');
    expect(pending.status, pending.text).toBe(202);
    const decided = await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE }, admin.auth);
    expect(decided.approval?.status).toBe(ApprovalStatus.APPROVED);
    const done = await sign(paywallBody(agentId, 'x402', url), 'slug-approval');
    expect(done.status, done.text).toBe(200);
    expect((await present(url, done.json.payment_header)).status).toBe(200);
  });

  test('error: with the DEFAULT configuration the loopback paywall is blocked: 400, never contacted', async () => {
    const path = '/paid?case=default-config';
    const r = await sign(paywallBody(defaults.bootstrap.agent_id, 'x402', x402.url(path)), undefined, defaults);
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toBe(BLOCKED);
    expect(x402.requestsTo(path)).toEqual([]);
  });

  test('error: a rail mismatch (type mpp for an x402 paywall) is refused without signing', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const r = await sign(paywallBody(agentId, 'mpp', x402.url('/paid?case=mismatch')));
    expect(r.status, r.text).toBe(400);
    expect(await ledger(agentId)).toEqual([]);
  });
});

describe('POST /api/sign type x402 against a v1 (JSON-body) paywall', () => {
  test('behavior: X-PAYMENT verifies with the reference ExactEvmSchemeV1 and the paywall answers 200', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = plain.url('/v1/paid');
    const r = await sign(paywallBody(agentId, 'x402', url));
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ cost_usd: '0.01', chain_id: 84532, recipient_address: PAY_TO, resource_url: url, payment_header: { name: 'X-PAYMENT' } });
    const sent = decodeBase64Json(r.json.payment_header.value);
    expect(sent).toMatchObject({ x402Version: 1, scheme: 'exact', network: 'base-sepolia' });
    expect(sent.payload.authorization).toMatchObject({ from: treasury, to: PAY_TO, value: '10000' });

    // The reference v1 verifier, on a chain-only mock, accepts it as is.
    const verified = await new ExactEvmSchemeV1(mockEvmChain().signer).verify(sent as PaymentPayload, v1Requirement(url) as unknown as PaymentRequirements);
    expect(verified).toMatchObject({ isValid: true, payer: treasury });

    // And the paywall (which runs the same verifier, then settles) answers 200.
    const paid = await present(url, r.json.payment_header);
    expect(paid.status, await paid.clone().text()).toBe(200);
    expect(decodeBase64Json(paid.headers.get('x-payment-response')!)).toMatchObject({ success: true, payer: treasury });
    expect(plain.v1Verifications.at(-1)).toMatchObject({ isValid: true, payer: treasury });
  });
});

describe('POST /api/sign type mpp against an mppx 0.11.0 paywall', () => {
  test('behavior: the Authorization: Payment credential makes the paywall answer 200 with a Payment-Receipt', async () => {
    const agentId = await agentWith({ allowlist: [MPP_RECIPIENT] });
    const url = mpp.url('/mpp/paid');
    const r = await sign(paywallBody(agentId, 'mpp', url));
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({
      signature: null,
      tx_hash: null,
      agent_id: agentId,
      cost_usd: '0.01',
      transaction_id: expect.stringMatching(UUID_RE),
      idempotent: false,
      type: 'mpp',
      chain_id: 42431,
      recipient_address: MPP_RECIPIENT,
      resource_url: url,
      mpp: { transaction_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/) },
      payment_header: { name: 'Authorization', value: expect.stringMatching(/^Payment [A-Za-z0-9_-]+$/) },
    });
    const credential = JSON.parse(Buffer.from(r.json.payment_header.value.slice('Payment '.length), 'base64url').toString('utf8'));
    expect(credential.challenge).toMatchObject({ realm: MPP_REALM, method: 'tempo', intent: 'charge' });
    expect(credential.source).toBe(`did:pkh:eip155:42431:${treasury}`);

    const broadcastBefore = mpp.broadcasts.length;
    const paid = await present(url, r.json.payment_header);
    expect(paid.status, await paid.clone().text()).toBe(200);
    expect(await paid.json()).toEqual({ ok: true, path: '/mpp/paid' });
    const receipt = Receipt.fromResponse(paid);
    expect(receipt).toMatchObject({ status: 'success', method: 'tempo', reference: r.json.mpp.transaction_hash });
    expect(mpp.broadcasts).toHaveLength(broadcastBefore + 1);
    expect(keccak256(mpp.broadcasts.at(-1)! as Hex)).toBe(r.json.mpp.transaction_hash);
    expect(await ledger(agentId)).toEqual([{ status: 'signed', amount: '0.01', recipient: MPP_RECIPIENT.toLowerCase(), chainId: 42431, slug: '', type: 'mpp' }]);
  });

  test('error: over the cap → 403; nothing signed or broadcast', async () => {
    const agentId = await agentWith({ allowlist: [MPP_RECIPIENT], cap: '0.005', threshold: '0.001' });
    const path = '/mpp/paid?case=cap';
    const broadcastBefore = mpp.broadcasts.length;
    const r = await sign(paywallBody(agentId, 'mpp', mpp.url(path)));
    expect(r.status, r.text).toBe(403);
    expect(r.json).toMatchObject({ error: 'Policy denied', reason: expect.stringMatching(/^Spend cap of \$0\.005/) });
    expect(paymentAttempts(mpp, path)).toEqual([]);
    expect(mpp.broadcasts).toHaveLength(broadcastBefore);
    expect((await ledger(agentId)).map((t) => t.status)).toEqual(['denied']);
  });

  test('error: an unlisted MPP recipient → 403; nothing signed', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const path = '/mpp/paid?case=unlisted';
    const r = await sign(paywallBody(agentId, 'mpp', mpp.url(path)));
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(`Recipient ${MPP_RECIPIENT.toLowerCase()} is not on the agent's allowlist`);
    expect(paymentAttempts(mpp, path)).toEqual([]);
    expect((await ledger(agentId)).map((t) => t.status)).toEqual(['denied']);
  });

  test('behavior: a registered realm and baseUrl let a slug allowlist pay the runtime recipient', async () => {
    const agentId = await agentWith({ allowlist: ['sign-mpp'] });
    const url = mpp.url('/good/paid');
    const r = await sign(paywallBody(agentId, 'mpp', url));
    expect(r.status, r.text).toBe(200);
    const paid = await present(url, r.json.payment_header);
    expect(paid.status, await paid.clone().text()).toBe(200);
    expect((await ledger(agentId))[0]).toMatchObject({ status: 'signed', slug: 'sign-mpp' });
  });

  test('behavior: MPP approval → collection re-probes and signs for the fresh challenge', async () => {
    const agentId = await agentWith({ allowlist: [MPP_RECIPIENT], threshold: '0.001' });
    const url = mpp.url('/mpp/paid?case=approval');
    const pending = await sign(paywallBody(agentId, 'mpp', url), 'mpp-approval');
    expect(pending.status, pending.text).toBe(202);
    await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE }, admin.auth);
    const done = await sign(paywallBody(agentId, 'mpp', url), 'mpp-approval');
    expect(done.status, done.text).toBe(200);
    const paid = await present(url, done.json.payment_header);
    expect(paid.status, await paid.clone().text()).toBe(200);
    expect(Receipt.fromResponse(paid).reference).toBe(done.json.mpp.transaction_hash);
  });
});

describe('PaymentPolicyService.Sign for paywalls over Connect JSON and gRPC', () => {
  let connect: Client<typeof PaymentPolicyService>;
  let channel: grpc.Client;
  beforeAll(() => {
    connect = connectClient(PaymentPolicyService, s.url);
    channel = grpcChannel(s.url);
  });
  afterAll(() => channel?.close());

  test('behavior: Connect JSON x402 sign gives the REST fields and a header the paywall accepts', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/paid?case=connect');
    const r = await connect.sign(
      { agentId, type: PaymentType.X402, recipientAddress: STRANGER, amountUsd: '0.5', payload: { case: 'x402', value: { resourceUrl: url } } },
      { headers: { authorization: `Bearer ${s.bootstrap.api_key}`, connection: 'close' } },
    );
    expect(r.outcome).toBe(SignOutcome.ALLOWED);
    expect(r).toMatchObject({ agentId, costUsd: '0.01', amountUsd: '0.01', chainId: 84532, type: PaymentType.X402, recipientAddress: PAY_TO, idempotent: false, resourceUrl: url });
    expect(r.signature).toMatch(SIG_RE);
    expect(r.authorization).toMatchObject({ from: treasury, to: PAY_TO, value: '10000', token: BASE_SEPOLIA_USDC, chainId: 84532 });
    expect(r.paymentHeader?.name).toBe('PAYMENT-SIGNATURE');
    const paid = await present(url, { name: r.paymentHeader!.name, value: r.paymentHeader!.value });
    expect(paid.status, await paid.clone().text()).toBe(200);
  });

  test('behavior: gRPC mpp sign gives a credential the mppx paywall accepts', async () => {
    const agentId = await agentWith({ allowlist: [MPP_RECIPIENT] });
    const url = mpp.url('/mpp/paid?case=grpc');
    const r = await grpcUnary(channel, PaymentPolicyService, PaymentPolicyService.method.sign,
      { agentId, type: PaymentType.MPP, payload: { case: 'mpp', value: { resourceUrl: url } } }, s.bootstrap.api_key);
    if (!r.ok) throw new Error(`gRPC Sign failed: ${r.code} ${r.details}`);
    expect(r.message).toMatchObject({ outcome: SignOutcome.ALLOWED, costUsd: '0.01', chainId: 42431, type: PaymentType.MPP, recipientAddress: MPP_RECIPIENT, resourceUrl: url });
    // The Tempo transaction hash REST writes as mpp.transaction_hash reaches RPC callers too.
    expect(r.message.mpp?.transactionHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(r.message.signature).toBeUndefined();
    expect(r.message.paymentHeader?.name).toBe('Authorization');
    const paid = await present(url, { name: r.message.paymentHeader!.name, value: r.message.paymentHeader!.value });
    expect(paid.status, await paid.clone().text()).toBe(200);
    expect(Receipt.fromResponse(paid).status).toBe('success');
  });

  test('behavior: gRPC over the cap is DENIED with the REST reason; nothing reaches the paywall', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], cap: '0.005', threshold: '0.001' });
    const path = '/paid?case=grpc-cap';
    const r = await grpcUnary(channel, PaymentPolicyService, PaymentPolicyService.method.sign,
      { agentId, type: PaymentType.X402, payload: { case: 'x402', value: { resourceUrl: x402.url(path) } } }, s.bootstrap.api_key);
    if (!r.ok) throw new Error(`gRPC Sign failed: ${r.code} ${r.details}`);
    expect(r.message.outcome).toBe(SignOutcome.DENIED);
    expect(r.message.reason).toMatch(/^Spend cap of \$0\.005 per 24 hours would be exceeded/);
    expect(r.message.paymentHeader).toBeUndefined();
    expect(paymentAttempts(x402, path)).toEqual([]);
  });
});
