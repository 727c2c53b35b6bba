import { Code } from '@connectrpc/connect';
import { AgentStatus, ApprovalStatus } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { getAddress, parseTransaction, recoverTransactionAddress, type Hex, type TransactionSerializedEIP1559 } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, ApiKeyMode, Decision } from '../gen/paypolicy/v1/admin_pb.js';
import type { Admin } from './helpers/admin.js';
import { createAgent, createTenant } from './helpers/admin.js';
import { connectClient } from './helpers/clients.js';
import {
  getApprovalStatus, listAllTransactions, postSign, recoverAuthorizationSigner, setPolicy, type SignBody, type WireAuthorization,
} from './helpers/payments.js';
import { bearer, expectRpcError } from './helpers/rpc.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * The approval lifecycle end to end against the real server: 202 → a human decision through
 * AdminService.DecideApproval → the agent repeats its request and collects the outcome. The clock
 * is injected and only ever moves forward, so expiry is tested without waiting.
 */

const T0 = Date.parse('2030-03-04T05:06:07.000Z');
const HOUR = 3600_000;
const RECIPIENT = '0x2222222222222222222222222222222222222222';
const OTHER_RECIPIENT = '0x3333333333333333333333333333333333333333';
const EXPIRED_REASON = /expired/i;

let clock = T0;
let s: TestServer;
let admin: Admin;
let key: string;
let orgId: string;
let treasury: string;

beforeAll(async () => {
  s = await startTestServer({ now: () => clock, logLevel: 'warn' });
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  key = s.bootstrap.api_key;
  orgId = s.bootstrap.org_id;
  treasury = getAddress(s.bootstrap.treasury_address);
});
afterAll(async () => s.close());

/** A fresh agent of the bootstrap organization: cap $10 per 24 h, approval above $5. */
async function freshAgent(name: string, capUsd = '10', thresholdUsd = '5'): Promise<string> {
  const agentId = await createAgent(admin, orgId, name);
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd, thresholdUsd });
  return agentId;
}

function pay(agentId: string, amountUsd: string, extra: Partial<SignBody> = {}): SignBody {
  return { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amountUsd, ...extra };
}

/** Dry-run verdict of a payment: `allowed`, `pending_approval` or `denied`. */
async function verdict(agentId: string, amountUsd: string, apiKey = key): Promise<string> {
  const r = await postSign(s.url, apiKey, { ...pay(agentId, amountUsd), dry_run: true });
  expect(r.json?.dry_run, r.text).toBe(true);
  return r.json.status as string;
}

/** Sends a payment that must need approval; returns its ids. */
async function requestApproval(agentId: string, amountUsd: string, idempotencyKey?: string, apiKey = key) {
  const r = await postSign(s.url, apiKey, pay(agentId, amountUsd), idempotencyKey);
  expect(r.status, r.text).toBe(202);
  expect(r.json).toEqual({
    status: 'pending_approval', reason: expect.stringMatching(/exceeds the approval threshold/), transaction_id: expect.any(String),
    approval_request_id: expect.any(String), rule: expect.objectContaining({ kind: 'approval_threshold', scope: 'agent' }),
  });
  return { approvalId: r.json.approval_request_id as string, transactionId: r.json.transaction_id as string, body: r.json };
}

function decide(id: string, decision: Decision, note = '') {
  return admin.client.decideApproval({ id, decision, note, decidedBy: 'alice' }, admin.auth);
}

describe('approval lifecycle', () => {
  test('behavior: approve, then the repeat with the same key collects a treasury signature for the same transaction', async () => {
    const agentId = await freshAgent('approve-agent');
    const created = clock;
    const { approvalId, transactionId, body } = await requestApproval(agentId, '6', 'approve-1');

    const pending = await getApprovalStatus(s.url, key, approvalId);
    expect(pending.status).toBe(200);
    expect(pending.json).toEqual({ status: 'pending', decided_at: null, expires_at: new Date(created + HOUR).toISOString(), transaction_id: transactionId });
    // A repeat before the decision replays the 202 without creating anything.
    const early = await postSign(s.url, key, pay(agentId, '6'), 'approve-1');
    expect(early.status).toBe(202);
    expect(early.json).toEqual(body);

    clock += 60_000;
    const decidedAt = clock;
    const decided = await decide(approvalId, Decision.APPROVE, 'looks fine');
    expect(decided.approval).toMatchObject({ id: approvalId, status: ApprovalStatus.APPROVED, transactionId, decidedBy: 'alice', note: 'looks fine', amountUsd: '6' });
    expect(timestampMs(decided.approval!.decidedAt!)).toBe(decidedAt);

    const repeat = await postSign(s.url, key, pay(agentId, '6'), 'approve-1');
    expect(repeat.status, repeat.text).toBe(200);
    expect(repeat.json).toMatchObject({ transaction_id: transactionId, idempotent: true, agent_id: agentId, cost_usd: '6', tx_hash: null });
    const auth = repeat.json.authorization as WireAuthorization;
    expect(auth.value).toBe('6000000');
    expect(getAddress(auth.to)).toBe(getAddress(RECIPIENT));
    // The validity window starts when the signature is made, at the decision, not at the request.
    expect(auth.valid_before).toBe(String(Math.floor(decidedAt / 1000) + 3600));
    expect(await recoverAuthorizationSigner(repeat.json.signature as Hex, auth)).toBe(treasury);
    // Collecting again gives the same signature.
    const again = await postSign(s.url, key, pay(agentId, '6'), 'approve-1');
    expect(again.json.signature).toBe(repeat.json.signature);

    const status = await getApprovalStatus(s.url, key, approvalId);
    expect(status.json).toEqual({
      status: 'approved', decided_at: new Date(decidedAt).toISOString(), expires_at: new Date(created + HOUR).toISOString(), transaction_id: transactionId,
    });
    expect(status.json.decided_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

    const rows = await listAllTransactions(admin, orgId, agentId);
    expect(rows.map((t) => [t.id, t.status, t.approvalRequestId])).toEqual([[transactionId, 'signed', approvalId]]);
    // The $6 now counts against the $10 cap: $4 more fits, $4.01 does not.
    expect(await verdict(agentId, '4')).toBe('allowed');
    expect(await verdict(agentId, '4.01')).toBe('denied');
  });

  test('behavior: deny ends the approval, the repeat is refused and the held cap is free again', async () => {
    const agentId = await freshAgent('deny-agent');
    const { approvalId, transactionId } = await requestApproval(agentId, '6', 'deny-1');
    // While pending, the $6 holds its share of the cap.
    const blocked = await postSign(s.url, key, pay(agentId, '5'));
    expect(blocked.status).toBe(403);
    expect(blocked.json.reason).toMatch(/^Spend cap of \$10 per 24 hours would be exceeded: \$6 already committed/);

    clock += 1000;
    const decidedAt = clock;
    const decided = await decide(approvalId, Decision.DENY, 'not today');
    expect(decided.approval).toMatchObject({ status: ApprovalStatus.DENIED, transactionId, note: 'not today' });

    const status = await getApprovalStatus(s.url, key, approvalId);
    expect(status.json).toMatchObject({ status: 'denied', decided_at: new Date(decidedAt).toISOString(), transaction_id: transactionId });
    const repeat = await postSign(s.url, key, pay(agentId, '6'), 'deny-1');
    expect(repeat.status).toBe(403);
    expect(repeat.json).toEqual({ error: 'Policy denied', reason: 'Denied by approver: not today', transaction_id: transactionId });

    // The headroom the $6 held is back: a $5 payment (at the threshold, so no approval) signs.
    const after = await postSign(s.url, key, pay(agentId, '5'));
    expect(after.status, after.text).toBe(200);
    expect(await verdict(agentId, '5')).toBe('allowed');
    expect(await verdict(agentId, '5.01')).toBe('denied');
    const rows = await listAllTransactions(admin, orgId, agentId);
    expect(rows.find((t) => t.id === transactionId)?.status).toBe('denied');
  });

  test('behavior: past expires_at a status read reports expired, the repeat is refused with the expiry reason and the cap is released', async () => {
    const agentId = await freshAgent('expire-read-agent');
    const created = clock;
    const { approvalId, transactionId } = await requestApproval(agentId, '6', 'expire-read-1');
    expect(await verdict(agentId, '5')).toBe('denied');

    clock = created + HOUR - 1;
    expect((await getApprovalStatus(s.url, key, approvalId)).json.status).toBe('pending');
    clock = created + HOUR + 1;
    const status = await getApprovalStatus(s.url, key, approvalId);
    expect(status.json).toMatchObject({ status: 'expired', expires_at: new Date(created + HOUR).toISOString(), transaction_id: transactionId });

    const repeat = await postSign(s.url, key, pay(agentId, '6'), 'expire-read-1');
    expect(repeat.status).toBe(403);
    expect(repeat.json).toMatchObject({ error: 'Policy denied', transaction_id: transactionId });
    expect(repeat.json.reason).toMatch(EXPIRED_REASON);
    expect(await verdict(agentId, '5')).toBe('allowed');
    const paid = await postSign(s.url, key, pay(agentId, '5'));
    expect(paid.status).toBe(200);
  });

  test('behavior: the agent\'s repeat alone expires an overdue approval and releases the cap', async () => {
    const agentId = await freshAgent('expire-repeat-agent');
    const { approvalId, transactionId } = await requestApproval(agentId, '6', 'expire-repeat-1');
    clock += HOUR + 1000;
    const repeat = await postSign(s.url, key, pay(agentId, '6'), 'expire-repeat-1');
    expect(repeat.status).toBe(403);
    expect(repeat.json.transaction_id).toBe(transactionId);
    expect(repeat.json.reason).toMatch(EXPIRED_REASON);
    expect((await getApprovalStatus(s.url, key, approvalId)).json.status).toBe('expired');
    expect(await verdict(agentId, '10')).not.toBe('denied');
  });

  test('behavior: ListApprovals sweeps overdue approvals nobody read, releasing their holds', async () => {
    const agentId = await freshAgent('sweep-agent');
    const { approvalId, transactionId } = await requestApproval(agentId, '6');
    clock += HOUR + 1000;

    const listed = await admin.client.listApprovals({ orgId, status: ApprovalStatus.EXPIRED }, admin.auth);
    expect(listed.approvals.find((a) => a.id === approvalId)).toMatchObject({ status: ApprovalStatus.EXPIRED, transactionId, amountUsd: '6' });
    const stillPending = await admin.client.listApprovals({ orgId, status: ApprovalStatus.PENDING }, admin.auth);
    expect(stillPending.approvals.map((a) => a.id)).not.toContain(approvalId);
    // The ledger row was released by the sweep, before any status read or repeat.
    const rows = await listAllTransactions(admin, orgId, agentId);
    expect(rows.map((t) => [t.id, t.status])).toEqual([[transactionId, 'expired']]);
    expect(await verdict(agentId, '5')).toBe('allowed');
    const paid = await postSign(s.url, key, pay(agentId, '5'));
    expect(paid.status).toBe(200);
  });

  test('behavior: a caller without an Idempotency-Key collects the approved result by sending its transaction_id as the key', async () => {
    const agentId = await freshAgent('keyless-agent');
    const { approvalId, transactionId, body } = await requestApproval(agentId, '7');
    // Before the decision the transaction id replays the 202.
    const early = await postSign(s.url, key, pay(agentId, '7'), transactionId);
    expect(early.status).toBe(202);
    expect(early.json).toEqual(body);

    await decide(approvalId, Decision.APPROVE);
    const collected = await postSign(s.url, key, pay(agentId, '7'), transactionId);
    expect(collected.status, collected.text).toBe(200);
    expect(collected.json).toMatchObject({ transaction_id: transactionId, idempotent: true, cost_usd: '7' });
    expect(await recoverAuthorizationSigner(collected.json.signature as Hex, collected.json.authorization as WireAuthorization)).toBe(treasury);
    // The key names that request only: a different body under it is a conflict, not a new payment.
    const other = await postSign(s.url, key, pay(agentId, '1'), transactionId);
    expect(other.status).toBe(409);
    const rows = await listAllTransactions(admin, orgId, agentId);
    expect(rows.map((t) => t.id)).toEqual([transactionId]);
    expect(await verdict(agentId, '3')).toBe('allowed');
    expect(await verdict(agentId, '3.01')).toBe('denied');
  });

  test('behavior: a keyless caller re-collects a payment signed without approval by its transaction_id', async () => {
    const agentId = await freshAgent('keyless-direct-agent');
    const first = await postSign(s.url, key, pay(agentId, '2'));
    expect(first.status, first.text).toBe(200);
    const again = await postSign(s.url, key, pay(agentId, '2'), first.json.transaction_id);
    expect(again.status, again.text).toBe(200);
    expect(again.json).toEqual({ ...first.json, idempotent: true });
    // Charged once: $8 of the $10 cap is left (above the $5 threshold, so it would need approval).
    expect(await verdict(agentId, '8')).toBe('pending_approval');
    expect(await verdict(agentId, '8.01')).toBe('denied');
  });

  test('behavior: an approved raw transaction is signed with a fresh account nonce', async () => {
    const agentId = await freshAgent('raw-agent');
    const r = await postSign(s.url, key, pay(agentId, '6', { type: 'raw_transaction' }), 'raw-1');
    expect(r.status).toBe(202);
    await decide(r.json.approval_request_id, Decision.APPROVE);
    const repeat = await postSign(s.url, key, pay(agentId, '6', { type: 'raw_transaction' }), 'raw-1');
    expect(repeat.status, repeat.text).toBe(200);
    expect(repeat.json.signature).toBeNull();
    const serialized = repeat.json.raw_transaction.serialized as TransactionSerializedEIP1559;
    const tx = parseTransaction(serialized);
    expect(String(tx.nonce)).toBe(repeat.json.raw_transaction.nonce);
    expect(await recoverTransactionAddress({ serializedTransaction: serialized })).toBe(treasury);
  });
});

describe('DecideApproval refusals', () => {
  test('error: approving after expires_at is FailedPrecondition and expires the approval', async () => {
    const agentId = await freshAgent('late-agent');
    const { approvalId, transactionId } = await requestApproval(agentId, '6', 'late-1');
    clock += HOUR;
    await expectRpcError(decide(approvalId, Decision.APPROVE), Code.FailedPrecondition, /expired/);
    expect((await getApprovalStatus(s.url, key, approvalId)).json.status).toBe('expired');
    const repeat = await postSign(s.url, key, pay(agentId, '6'), 'late-1');
    expect(repeat.status).toBe(403);
    expect(repeat.json.reason).toMatch(EXPIRED_REASON);
    const rows = await listAllTransactions(admin, orgId, agentId);
    expect(rows.map((t) => [t.id, t.status])).toEqual([[transactionId, 'expired']]);
    expect(await verdict(agentId, '5')).toBe('allowed');
    // Denying an expired approval is refused the same way.
    await expectRpcError(decide(approvalId, Decision.DENY), Code.FailedPrecondition, /already expired/);
  });

  test('error: a second decision is FailedPrecondition and changes nothing', async () => {
    const agentId = await freshAgent('twice-agent');
    const { approvalId } = await requestApproval(agentId, '6', 'twice-1');
    await decide(approvalId, Decision.APPROVE);
    const first = await postSign(s.url, key, pay(agentId, '6'), 'twice-1');
    expect(first.status, first.text).toBe(200);
    await expectRpcError(decide(approvalId, Decision.APPROVE), Code.FailedPrecondition, /already approved/);
    await expectRpcError(decide(approvalId, Decision.DENY), Code.FailedPrecondition, /already approved/);
    const again = await postSign(s.url, key, pay(agentId, '6'), 'twice-1');
    expect(again.json.signature).toBe(first.json.signature);
    expect((await listAllTransactions(admin, orgId, agentId, 'signed'))).toHaveLength(1);

    const otherAgent = await freshAgent('twice-deny-agent');
    const denied = await requestApproval(otherAgent, '6', 'twice-2');
    await decide(denied.approvalId, Decision.DENY);
    await expectRpcError(decide(denied.approvalId, Decision.APPROVE), Code.FailedPrecondition, /already denied/);
  });

  test('error: concurrent approvals of one request sign it once', async () => {
    const agentId = await freshAgent('race-agent');
    const { approvalId } = await requestApproval(agentId, '6', 'race-1');
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => decide(approvalId, Decision.APPROVE)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(String(r.reason)).toMatch(/already approved/);
    const rows = await listAllTransactions(admin, orgId, agentId);
    expect(rows.map((t) => t.status)).toEqual(['signed']);
    expect(await verdict(agentId, '4')).toBe('allowed');
    expect(await verdict(agentId, '4.01')).toBe('denied');
  });

  test('error: approving while the agent is paused is FailedPrecondition with the policy reason; the approval stays pending', async () => {
    const agentId = await freshAgent('paused-agent');
    const { approvalId } = await requestApproval(agentId, '6', 'paused-1');
    await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
    await expectRpcError(decide(approvalId, Decision.APPROVE), Code.FailedPrecondition, /Agent is paused/);
    expect((await getApprovalStatus(s.url, key, approvalId)).json).toMatchObject({ status: 'pending', decided_at: null });
    const repeat = await postSign(s.url, key, pay(agentId, '6'), 'paused-1');
    expect(repeat.status).toBe(202);

    // Once the agent is active again the same approval can still be granted.
    await admin.client.updateAgent({ agentId, status: AgentStatus.ACTIVE }, admin.auth);
    await decide(approvalId, Decision.APPROVE);
    const collected = await postSign(s.url, key, pay(agentId, '6'), 'paused-1');
    expect(collected.status).toBe(200);
  });

  test('error: approving after the recipient left the allowlist is refused with the allowlist reason', async () => {
    const agentId = await freshAgent('allowlist-agent');
    const { approvalId } = await requestApproval(agentId, '6', 'allow-1');
    await setPolicy(admin, agentId, { allowlist: [OTHER_RECIPIENT], capUsd: '10', thresholdUsd: '5' });
    await expectRpcError(decide(approvalId, Decision.APPROVE), Code.FailedPrecondition, /not on the agent's allowlist/);
    expect((await getApprovalStatus(s.url, key, approvalId)).json.status).toBe('pending');
  });

  test('error: approving after the cap was lowered below the held amount is refused with the cap reason', async () => {
    const agentId = await freshAgent('lowered-cap-agent');
    const { approvalId } = await requestApproval(agentId, '6', 'lowered-1');
    await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '5', thresholdUsd: '5' });
    await expectRpcError(decide(approvalId, Decision.APPROVE), Code.FailedPrecondition, /Spend cap of \$5 per 24 hours would be exceeded/);
    expect((await getApprovalStatus(s.url, key, approvalId)).json.status).toBe('pending');
  });

  test('error: approving after other payments consumed the cap is refused', async () => {
    // A two-day approval window outlives the 24-hour cap window, so the pending $6 stops holding
    // cap after a day and other payments can use it up.
    const window = await orgWithWindow('long-window', 2 * 24 * 3600);
    const { approvalId } = await requestApproval(window.agentId, '6', 'consumed-1', window.apiKey);
    clock += 25 * HOUR;
    expect((await postSign(s.url, window.apiKey, pay(window.agentId, '5'))).status).toBe(200);
    expect((await postSign(s.url, window.apiKey, pay(window.agentId, '5'))).status).toBe(200);
    await expectRpcError(decide(approvalId, Decision.APPROVE), Code.FailedPrecondition, /Spend cap of \$10 per 24 hours would be exceeded/);
    expect((await getApprovalStatus(s.url, window.apiKey, approvalId)).json.status).toBe('pending');
  });

  test('error: an unknown or malformed approval id is NotFound; a missing decision is InvalidArgument', async () => {
    await expectRpcError(decide('00000000-0000-4000-8000-000000000000', Decision.APPROVE), Code.NotFound);
    await expectRpcError(decide('not-a-uuid', Decision.APPROVE), Code.NotFound);
    const agentId = await freshAgent('unspecified-agent');
    const { approvalId } = await requestApproval(agentId, '6');
    await expectRpcError(decide(approvalId, Decision.UNSPECIFIED), Code.InvalidArgument);
    expect((await getApprovalStatus(s.url, key, approvalId)).json.status).toBe('pending');
  });
});

describe('GET /api/approvals/{id}/status scoping', () => {
  test('error: another organization\'s approval id is 404 with an empty body', async () => {
    const agentId = await freshAgent('scoped-agent');
    const { approvalId } = await requestApproval(agentId, '6');
    const other = await createTenant(admin, 'other-org');
    const r = await getApprovalStatus(s.url, other.apiKey, approvalId);
    expect(r.status).toBe(404);
    expect(r.text).toBe('');
    const unknown = await getApprovalStatus(s.url, other.apiKey, '00000000-0000-4000-8000-000000000000');
    expect([unknown.status, unknown.text]).toEqual([404, '']);
    // The owner still sees it.
    expect((await getApprovalStatus(s.url, key, approvalId)).status).toBe(200);
  });
});

describe('cap window of approved payments', () => {
  // Counted from the request time, a payment approved more than 24 h later would never count. The
  // cap counts from cap_at, the signing time for approved payments.
  test('behavior: a payment approved more than 24 h after its request counts against the cap from its signing', async () => {
    const window = await orgWithWindow('late-sign', 2 * 24 * 3600);
    const { approvalId } = await requestApproval(window.agentId, '6', 'late-sign-1', window.apiKey);
    clock += 25 * HOUR;
    await decide(approvalId, Decision.APPROVE);
    const collected = await postSign(s.url, window.apiKey, pay(window.agentId, '6'), 'late-sign-1');
    expect(collected.status).toBe(200);
    // $6 was signed a moment ago: only $4 of the $10 per 24 hours is left.
    expect(await verdict(window.agentId, '5', window.apiKey)).toBe('denied');
  });
});

/** An organization with its own approval window, a treasury, a test key and an agent (cap $10, approval above $5). */
async function orgWithWindow(name: string, approvalWindowSeconds: number) {
  const org = await admin.client.createOrganization({ name, approvalWindowSeconds }, admin.auth);
  const id = org.organization!.id;
  expect(org.organization!.approvalWindowSeconds).toBe(approvalWindowSeconds);
  await admin.client.provisionTreasury({ orgId: id }, admin.auth);
  const apiKey = (await admin.client.createApiKey({ orgId: id, mode: ApiKeyMode.TEST, label: `${name}-key` }, admin.auth)).plaintextKey;
  const agentId = await createAgent(admin, id, `${name}-agent`);
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '5' });
  return { orgId: id, apiKey, agentId };
}
