import { getAddress, parseTransaction, recoverTransactionAddress, type Hex, type TransactionSerializedEIP1559 } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService } from '../gen/paypolicy/v1/admin_pb.js';
import { ApprovalStatus } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { createAgent, createTenant, type Admin } from './helpers/admin.js';
import { connectClient } from './helpers/clients.js';
import {
  listAllTransactions, postSign, recoverAuthorizationSigner, setPolicy, usdToMicros, type SignBody, type WireAuthorization,
} from './helpers/payments.js';
import { bearer } from './helpers/rpc.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * POST /api/sign under load from one agent: the policy check and the cap reservation must be one
 * atomic step, so a burst can never sign more than the cap allows, duplicates of one
 * Idempotency-Key charge once, and raw transactions never share an account nonce.
 * Every request of a burst is in flight at the same time (Promise.all over fetch, one socket each).
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';

let s: TestServer;
let admin: Admin;
let treasury: string;

beforeAll(async () => {
  // These bursts test the cap and idempotency, not admission or shedding (their own tests are in
  // test/adversarial/overload.test.ts and tenantShare.test.ts): a 520-request burst from one key
  // exceeds one organization's part of the agent gate, and on a loaded machine some of it would
  // wait past the signing stage's 1 s deadline and be shed with 503.
  s = await startTestServer({ logLevel: 'warn', limits: { maxInFlight: 1024, maxSignQueue: 1024, maxQueueMs: 120_000 } });
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  treasury = getAddress(s.bootstrap.treasury_address);
});
afterAll(async () => s.close());

/** The server's error log lines so far (first three), to explain an unexpected 5xx. */
function serverErrors(): string {
  return s.logs.filter((l) => /"level":(50|60)/.test(l)).slice(0, 3).join('') || 'no error logged';
}

/** A fresh agent of the bootstrap organization with the given cap and threshold. */
async function freshAgent(name: string, capUsd: string, thresholdUsd: string): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, name);
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd, thresholdUsd });
  return agentId;
}

function eip3009(agentId: string, amountUsd: string): SignBody {
  return { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amountUsd };
}

describe('signPayment under concurrency', () => {
  test('behavior: a burst of 520 requests signs exactly floor(cap / amount) payments and denies the rest', async () => {
    // $10.01 / $0.03 = 333.67: 333 payments fit ($9.99), the 334th would reach $10.02.
    const agentId = await freshAgent('burst-agent', '10.01', '1');
    const affordable = 333;
    const total = 520;
    const body = eip3009(agentId, '0.03');
    // Half carry distinct Idempotency-Keys, half carry none: both paths reserve against the cap.
    const answers = await Promise.all(
      Array.from({ length: total }, (_, i) => postSign(s.url, s.bootstrap.api_key, body, i % 2 === 0 ? `burst-${i}` : undefined)),
    );

    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((st) => st >= 500), serverErrors()).toEqual([]);
    const ok = answers.filter((a) => a.status === 200);
    const denied = answers.filter((a) => a.status === 403);
    expect(ok).toHaveLength(affordable);
    expect(denied).toHaveLength(total - affordable);
    for (const d of denied) {
      expect(d.json.error).toBe('Policy denied');
      expect(d.json.reason).toMatch(/^Spend cap of \$10\.01 per 24 hours would be exceeded: \$9\.99 already committed/);
    }

    // Every 200 is a distinct, valid authorization signed by the organization's treasury.
    const txIds = new Set(ok.map((a) => a.json.transaction_id as string));
    const nonces = new Set(ok.map((a) => (a.json.authorization as WireAuthorization).nonce));
    expect(txIds.size).toBe(affordable);
    expect(nonces.size).toBe(affordable);
    for (const a of ok) {
      expect(a.json.idempotent).toBe(false);
      expect(a.json.cost_usd).toBe('0.03');
      const auth = a.json.authorization as WireAuthorization;
      expect(auth.value).toBe('30000');
      expect(getAddress(auth.to)).toBe(getAddress(RECIPIENT));
      expect(await recoverAuthorizationSigner(a.json.signature as Hex, auth)).toBe(treasury);
    }

    // The ledger agrees: exactly the answered 200s are signed, and they add up to what was committed.
    const signed = await listAllTransactions(admin, s.bootstrap.org_id, agentId, 'signed');
    expect(signed).toHaveLength(affordable);
    expect(new Set(signed.map((t) => t.id))).toEqual(txIds);
    const committed = signed.reduce((sum, t) => sum + usdToMicros(t.amountUsd), 0n);
    expect(committed).toBe(BigInt(affordable) * 30_000n);
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows).toHaveLength(total);
    expect(rows.filter((t) => t.status === 'denied')).toHaveLength(total - affordable);

    // And the cap is exhausted: even one more cent beyond the $0.02 left is refused.
    const more = await postSign(s.url, s.bootstrap.api_key, { ...body, amount_usd: '0.03', dry_run: true });
    expect(more.status).toBe(403);
    const rest = await postSign(s.url, s.bootstrap.api_key, { ...body, amount_usd: '0.02', dry_run: true });
    expect(rest.status).toBe(200);
  });

  test('behavior: 100 concurrent duplicates of one Idempotency-Key sign once and all carry the same answer', async () => {
    const agentId = await freshAgent('dup-agent', '5', '5');
    const body = eip3009(agentId, '0.25');
    const answers = await Promise.all(Array.from({ length: 100 }, () => postSign(s.url, s.bootstrap.api_key, body, 'dup-key-1')));

    expect(answers.map((a) => a.status), serverErrors()).toEqual(Array(100).fill(200));
    const first = answers[0]!.json;
    for (const a of answers) {
      expect(a.json.transaction_id).toBe(first.transaction_id);
      expect(a.json.signature).toBe(first.signature);
      expect(a.json.authorization).toEqual(first.authorization);
    }
    expect(answers.filter((a) => a.json.idempotent === false)).toHaveLength(1);
    expect(answers.filter((a) => a.json.idempotent === true)).toHaveLength(99);
    expect(await recoverAuthorizationSigner(first.signature, first.authorization)).toBe(treasury);

    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows.map((t) => [t.id, t.status, t.amountUsd])).toEqual([[first.transaction_id, 'signed', '0.25']]);
    // Charged once: $4.75 of the $5 cap is still free.
    const probe = await postSign(s.url, s.bootstrap.api_key, { ...eip3009(agentId, '4.75'), dry_run: true });
    expect(probe.status).toBe(200);
    const over = await postSign(s.url, s.bootstrap.api_key, { ...eip3009(agentId, '4.750001'), dry_run: true });
    expect(over.status).toBe(403);
  });

  test('behavior: 50 concurrent raw transactions get the account nonces 0..49, each once', async () => {
    // A fresh organization: account nonces are counted per treasury and chain.
    const tenant = await createTenant(admin, 'nonce-org');
    const tenantTreasury = getAddress((await admin.client.provisionTreasury({ orgId: tenant.orgId }, admin.auth)).treasuryAddress);
    await setPolicy(admin, tenant.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '10' });
    const body: SignBody = { agent_id: tenant.agentId, type: 'raw_transaction', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1' };
    const answers = await Promise.all(Array.from({ length: 50 }, () => postSign(s.url, tenant.apiKey, body)));

    expect(answers.map((a) => a.status), serverErrors()).toEqual(Array(50).fill(200));
    const nonces: number[] = [];
    for (const a of answers) {
      expect(a.json.signature).toBeNull();
      const raw = a.json.raw_transaction as { serialized: TransactionSerializedEIP1559; hash: Hex; nonce: string; chain_id: number };
      const tx = parseTransaction(raw.serialized);
      expect(tx.type).toBe('eip1559');
      expect(tx.chainId).toBe(8453);
      expect(String(tx.nonce)).toBe(raw.nonce);
      expect(await recoverTransactionAddress({ serializedTransaction: raw.serialized })).toBe(tenantTreasury);
      nonces.push(tx.nonce!);
    }
    expect(nonces.sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  test('behavior: 100 concurrent duplicates above the threshold create exactly one approval', async () => {
    const tenant = await createTenant(admin, 'approval-burst-org');
    await admin.client.provisionTreasury({ orgId: tenant.orgId }, admin.auth);
    await setPolicy(admin, tenant.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '1' });
    const body = eip3009(tenant.agentId, '5');
    const answers = await Promise.all(Array.from({ length: 100 }, () => postSign(s.url, tenant.apiKey, body, 'big-payment')));

    expect(answers.map((a) => a.status), serverErrors()).toEqual(Array(100).fill(202));
    const first = answers[0]!.json;
    expect(first.status).toBe('pending_approval');
    for (const a of answers) expect(a.json).toEqual(first);

    const approvals = await admin.client.listApprovals({ orgId: tenant.orgId }, admin.auth);
    expect(approvals.approvals.map((a) => [a.id, a.transactionId, a.status])).toEqual([[first.approval_request_id, first.transaction_id, ApprovalStatus.PENDING]]);
    const rows = await listAllTransactions(admin, tenant.orgId, tenant.agentId);
    expect(rows.map((t) => [t.id, t.status])).toEqual([[first.transaction_id, 'pending_approval']]);
    // The one pending payment holds $5 of the $100 cap, not $500.
    const probe = await postSign(s.url, tenant.apiKey, { ...eip3009(tenant.agentId, '95'), dry_run: true });
    expect(probe.json.status).toBe('pending_approval');
    const over = await postSign(s.url, tenant.apiKey, { ...eip3009(tenant.agentId, '95.01'), dry_run: true });
    expect(over.status).toBe(403);
  });
});
