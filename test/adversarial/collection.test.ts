import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { AgentStatus, ApprovalStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/facilitator';
import { getAddress, type Address } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { sweepExpiredApprovals } from '../../src/app/approvals/approvals.js';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { listAllTransactions, postSign, recoverAuthorizationSigner, setPolicy, type SignBody } from '../helpers/payments.js';
import { PAY_TO, mockEvmChain, startFetchPeer, startX402Peer, v1Requirement, type Peer, type X402Peer } from '../helpers/peers.js';
import { startTestServer, type RestResult, type TestServer } from '../helpers/server.js';

/**
 * Approved payments are re-checked when collected, and validity windows are bounded, against the real server and real paywalls on loopback. An approved x402 payment
 * is signed only when the agent collects it; between approval and collection the agent may be
 * paused or revoked, its allowlist or cap may change, or it may never come back. None of that may
 * end in a signature, and a payment nobody collects must give its hold back.
 */

/** Written out here independently of src/: 15 minutes after the decision. */
const COLLECTION_WINDOW_MS = 15 * 60 * 1000;
const EXPIRED_REASON = 'Approved payment was not collected within 15 minutes of the approval; send a new request';
const RECHECK = 'Policy re-check at collection refused the approved payment: ';
const DAY_S = 86_400;

let clock = Date.now();
let x402: X402Peer;
let timeouts: Peer;
let s: TestServer;
let admin: Admin;
let treasury: Address;
const v1 = new ExactEvmSchemeV1(mockEvmChain().signer);

/** An x402 v1 paywall whose requirement carries `maxTimeoutSeconds` = the `t` query parameter. */
function timeoutRequirement(url: URL) {
  return { ...v1Requirement(`${url.origin}${url.pathname}`), maxTimeoutSeconds: Number(url.searchParams.get('t')) };
}

beforeAll(async () => {
  x402 = await startX402Peer();
  timeouts = await startFetchPeer((req) => {
    const requirement = timeoutRequirement(new URL(req.url));
    return new Response(JSON.stringify({ x402Version: 1, error: 'X-PAYMENT header is required', accepts: [requirement] }), {
      status: 402, headers: { 'content-type': 'application/json' },
    });
  });
  s = await startTestServer({ dev: true, logLevel: 'warn', now: () => clock, probeAllowHosts: [x402.host, timeouts.host] });
  admin = adminFor(s);
  treasury = getAddress(s.bootstrap.treasury_address);
});

afterAll(async () => {
  await s?.close();
  await Promise.all([x402?.close(), timeouts?.close()]);
});

/** An agent allowed to pay PAY_TO; $0.01 paywall payments need approval (threshold $0.005). */
async function agentWith(capUsd = '0.015'): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, 'collection');
  await setPolicy(admin, agentId, { allowlist: [PAY_TO.toLowerCase()], capUsd, thresholdUsd: '0.005' });
  return agentId;
}

function sign(agentId: string, url: string, key?: string, extra: Partial<SignBody> = {}): Promise<RestResult> {
  const body: SignBody = { agent_id: agentId, type: 'x402', chain_id: 8453, recipient_address: PAY_TO, amount_usd: 0.01, payload: { resource_url: url }, ...extra };
  return postSign(s.url, s.bootstrap.api_key, body, key);
}

/** A $0.01 x402 payment a human has approved and the agent has not collected yet. */
async function approved(agentId: string, key: string): Promise<{ url: string; transactionId: string }> {
  const url = x402.url(`/approval?case=${key}`);
  const pending = await sign(agentId, url, key);
  expect(pending.status, pending.text).toBe(202);
  const decided = await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE }, admin.auth);
  expect(decided.approval?.status).toBe(ApprovalStatus.APPROVED);
  return { url, transactionId: pending.json.transaction_id };
}

/**
 * Whether the agent's cap still holds the approved $0.01: with a $0.015 cap, a $0.006 payment is
 * refused by the cap while it does, and only needs approval once it is released.
 */
async function holdCounted(agentId: string): Promise<boolean> {
  const direct = await postSign(s.url, s.bootstrap.api_key, {
    agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: PAY_TO, amount_usd: '0.006', dry_run: true,
  });
  expect(['denied', 'pending_approval']).toContain(direct.json.status);
  return direct.json.status === 'denied';
}

async function statuses(agentId: string): Promise<Array<string | undefined>> {
  return (await listAllTransactions(admin, s.bootstrap.org_id, agentId)).map((t) => t.status);
}

describe('validity windows are bounded by 86,400 s (x402 maxTimeoutSeconds is clamped)', () => {
  test.each([
    [1, 30],
    [60, 60],
    [DAY_S - 1, DAY_S - 1],
    [DAY_S, DAY_S],
    [DAY_S + 1, DAY_S],
    [900_000_000, DAY_S],
    [Number.MAX_SAFE_INTEGER, DAY_S],
  ])('behavior: maxTimeoutSeconds %i → valid_before = now + %i', async (timeout, expected) => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'validity');
    await setPolicy(admin, agentId, { allowlist: [PAY_TO.toLowerCase()], capUsd: '10', thresholdUsd: '1' });
    const url = timeouts.url(`/v1/paid?t=${timeout}`);
    const r = await sign(agentId, url);
    expect(r.status, r.text).toBe(200);
    expect(BigInt(r.json.authorization.valid_before)).toBe(BigInt(Math.floor(clock / 1000) + expected));
    expect(await recoverAuthorizationSigner(r.json.signature, r.json.authorization)).toBe(treasury);
    // Clamping keeps the payment acceptable: the reference v1 verifier takes the shorter window.
    const requirement = timeoutRequirement(new URL(url)) as unknown as PaymentRequirements;
    const payload = JSON.parse(Buffer.from(r.json.payment_header.value, 'base64').toString('utf8')) as PaymentPayload;
    const verified = await v1.verify(payload, requirement);
    expect(verified.isValid, verified.invalidReason).toBe(true);
  });
});

describe('collecting an approved payment re-checks the policy as it stands', () => {
  test('behavior: nothing changed → collected and signed; the own hold is not counted twice', async () => {
    // Cap exactly the amount: counting the approved row's own hold again would refuse it.
    const agentId = await agentWith('0.01');
    const { url } = await approved(agentId, 'unchanged');
    const r = await sign(agentId, url, 'unchanged');
    expect(r.status, r.text).toBe(200);
    expect(r.json.authorization.to).toBe(PAY_TO);
    expect(await statuses(agentId)).toEqual(['signed']);
  });

  test('error: the agent was paused after approval → 403, no signature, hold released', async () => {
    const agentId = await agentWith();
    const { url } = await approved(agentId, 'paused');
    await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
    const r = await sign(agentId, url, 'paused');
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(`${RECHECK}Agent is paused; it cannot make payments`);
    expect(r.json.signature).toBeUndefined();
    await admin.client.updateAgent({ agentId, status: AgentStatus.ACTIVE }, admin.auth);
    expect(await statuses(agentId)).toEqual(['denied']);
    expect(await holdCounted(agentId)).toBe(false);
    // Reactivating does not revive the refused payment.
    expect((await sign(agentId, url, 'paused')).status).toBe(403);
  });

  test('error: the agent was revoked after approval → 403, no signature', async () => {
    const agentId = await agentWith();
    const { url } = await approved(agentId, 'revoked');
    await admin.client.updateAgent({ agentId, status: AgentStatus.REVOKED }, admin.auth);
    const r = await sign(agentId, url, 'revoked');
    expect(r.status, r.text).toBe(403);
    expect(r.json.signature).toBeUndefined();
    expect(await statuses(agentId)).not.toContain('signed');
  });

  test('error: the recipient left the allowlist after approval → 403, hold released', async () => {
    const agentId = await agentWith();
    const { url } = await approved(agentId, 'allowlist');
    await setPolicy(admin, agentId, { allowlist: ['0x90f79bf6eb2c4f870365e785982e1f101e93b906'], capUsd: '0.015', thresholdUsd: '0.005' });
    const r = await sign(agentId, url, 'allowlist');
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(`${RECHECK}Recipient ${PAY_TO.toLowerCase()} is not on the agent's allowlist`);
    await setPolicy(admin, agentId, { allowlist: [PAY_TO.toLowerCase()], capUsd: '0.015', thresholdUsd: '0.005' });
    expect(await statuses(agentId)).toEqual(['denied']);
    expect(await holdCounted(agentId)).toBe(false);
  });

  test('error: the cap was lowered below the payment after approval → 403 spend cap', async () => {
    const agentId = await agentWith();
    const { url } = await approved(agentId, 'cap');
    await setPolicy(admin, agentId, { allowlist: [PAY_TO.toLowerCase()], capUsd: '0.009', thresholdUsd: '0.005' });
    const r = await sign(agentId, url, 'cap');
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(`${RECHECK}Spend cap of $0.009 per 24 hours would be exceeded: $0 already committed, this payment is $0.01 ($0.009 left)`);
    expect(await statuses(agentId)).toEqual(['denied']);
  });

  test('behavior: the threshold is still the human\'s to override (lowered after approval, collected anyway)', async () => {
    const agentId = await agentWith();
    const { url } = await approved(agentId, 'threshold');
    await setPolicy(admin, agentId, { allowlist: [PAY_TO.toLowerCase()], capUsd: '0.015', thresholdUsd: '0.000001' });
    const r = await sign(agentId, url, 'threshold');
    expect(r.status, r.text).toBe(200);
  });
});

describe('the collection window', () => {
  test('behavior: collected just inside the window; it then counts in the cap for 24 h from its signature', async () => {
    const agentId = await agentWith();
    const { url } = await approved(agentId, 'late');
    const decidedAt = clock;
    clock += COLLECTION_WINDOW_MS - 1;
    const r = await sign(agentId, url, 'late');
    expect(r.status, r.text).toBe(200);
    // 24 h after the decision but not yet after the signature: still counted.
    clock = decidedAt + 24 * 3600 * 1000 + 1;
    expect(await holdCounted(agentId)).toBe(true);
    clock = decidedAt + COLLECTION_WINDOW_MS - 1 + 24 * 3600 * 1000 + 1;
    expect(await holdCounted(agentId)).toBe(false);
  });

  test('error: collected at the end of the window → 403 expired, the hold released, no probe', async () => {
    const agentId = await agentWith();
    const { url, transactionId } = await approved(agentId, 'expired');
    expect(await holdCounted(agentId)).toBe(true);
    const probes = x402.requestsTo('/approval?case=expired').length;
    clock += COLLECTION_WINDOW_MS;
    const r = await sign(agentId, url, 'expired');
    expect(r.status, r.text).toBe(403);
    expect(r.json).toEqual({ error: 'Policy denied', reason: EXPIRED_REASON, transaction_id: transactionId });
    expect(x402.requestsTo('/approval?case=expired').length).toBe(probes);
    expect(await statuses(agentId)).toEqual(['expired']);
    expect(await holdCounted(agentId)).toBe(false);
  });

  test('behavior: the sweep expires an uncollected payment without any read', async () => {
    const agentId = await agentWith();
    const { url } = await approved(agentId, 'swept');
    clock += COLLECTION_WINDOW_MS + 1;
    expect(await sweepExpiredApprovals(s.app.deps)).toBeGreaterThanOrEqual(1);
    expect(await statuses(agentId)).toEqual(['expired']);
    const r = await sign(agentId, url, 'swept');
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(EXPIRED_REASON);
  });
});
