import { getAddress, parseTransaction, recoverTransactionAddress, type Address, type Hex } from 'viem';
import { ApprovalStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { sweepExpiredApprovals } from '../../src/app/approvals/approvals.js';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { postSign, recoverAuthorizationSigner, setPolicy, type SignBody, type WireAuthorization } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Write errors do not strand holds. On a full disk the commit that settles a signature fails and
 * rolls back, and so may the write that should then release the reservation, leaving the row in
 * `signing` (holding the cap, answering 409, keeping its nonce). Such rows are released once writes
 * succeed again, by the sweep or the next successful settle, without a restart; the signature whose
 * settle never committed is never returned.
 *
 * The fault is real SQLite: from the moment the signer is handed a job (after the reservation
 * committed, before the settling commit) the server's own connection runs with
 * `PRAGMA query_only`, so every write, the release included, fails (SQLITE_READONLY at BEGIN
 * IMMEDIATE, a rollback without an I/O error, as SQLITE_FULL is on a full disk; neither stops the
 * service). Clearing the pragma is the disk getting space back.
 */

const RECIPIENT = '0x90f79bf6eb2c4f870365e785982e1f101e93b906';
const DAY_MS = 86_400_000;

let s: TestServer;
let admin: Admin;
let treasury: Address;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = adminFor(s);
  treasury = getAddress(s.bootstrap.treasury_address);
});
afterAll(async () => {
  await s?.close();
});

function writesFail(on: boolean): void {
  s.app.store.db.pragma(`query_only = ${on ? 1 : 0}`);
}

/** Runs `fault` whenever the signer is handed a job; undone after each test. */
let restoreSigner: (() => void) | undefined;
function onSign(fault: () => void): void {
  const signer = s.app.deps.signer;
  const real = signer.sign;
  signer.sign = (job) => {
    fault();
    return real.call(signer, job);
  };
  restoreSigner = () => {
    signer.sign = real;
  };
}
afterEach(() => {
  restoreSigner?.();
  restoreSigner = undefined;
  writesFail(false);
});

async function agent(p: { cap: string; threshold: string }): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, 'stranded');
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: p.cap, thresholdUsd: p.threshold });
  return agentId;
}

function raw(agentId: string, amount: string): SignBody {
  return { agent_id: agentId, type: 'raw_transaction', chain_id: 84532, recipient_address: RECIPIENT, amount_usd: amount, payload: {} };
}

function committed(agentId: string): bigint {
  const now = s.app.deps.now();
  return s.app.store.payments.committedSince(agentId, now - DAY_MS, now);
}

/** Signs a raw transaction that must be allowed; returns its nonce after checking its signer. */
async function signedNonce(body: SignBody, key: string): Promise<number> {
  const r = await postSign(s.url, s.bootstrap.api_key, body, key);
  expect(r.status, r.text).toBe(200);
  const serialized = r.json.raw_transaction.serialized as `0x02${string}`;
  expect(await recoverTransactionAddress({ serializedTransaction: serialized })).toBe(treasury);
  return parseTransaction(serialized).nonce!;
}

/**
 * Raw transactions whose settle and release both failed, one after the other (writes work again
 * for each reservation and fail from its signing on). Returns their transaction ids.
 */
async function strand(agentId: string, prefix: string, n: number): Promise<string[]> {
  onSign(() => writesFail(true));
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    writesFail(false);
    const r = await postSign(s.url, s.bootstrap.api_key, raw(agentId, '0.05'), `${prefix}-${i}`);
    // The signature was made but never recorded: it does not leave.
    expect(r.status, r.text).toBe(500);
    expect(r.text).not.toMatch(/0x02[0-9a-f]{40}/);
    const row = s.app.store.payments.findByIdempotencyKey(agentId, `${prefix}-${i}`)!;
    expect(row.status).toBe('signing');
    ids.push(row.id);
  }
  restoreSigner!();
  return ids;
}

function logCount(msg: string): number {
  return s.logs.filter((l) => (JSON.parse(l) as { msg?: string }).msg === msg).length;
}

describe('rows a failed write left in signing', () => {
  test('property: 16 of them hold the cap while writes fail and are released by the sweep once writes succeed; the cap and every nonce come back', async () => {
    const agentId = await agent({ cap: '1', threshold: '100' });
    const logsBefore = logCount('a write failed, leaving payments in signing; they are released once writes succeed again');
    const ids = await strand(agentId, 'full', 16);
    // Still failing: the sweep retries and keeps them; the repeat is told to come back.
    expect(await sweepExpiredApprovals(s.app.deps)).toBe(0);
    expect(ids.map((id) => s.app.store.payments.get(id)!.status)).toEqual(ids.map(() => 'signing'));
    expect(committed(agentId)).toBe(800_000n);
    const busy = await postSign(s.url, s.bootstrap.api_key, raw(agentId, '0.05'), 'full-3');
    expect(busy.status, busy.text).toBe(409);
    expect(busy.json.code).toBe('in_progress');

    writesFail(false);
    await sweepExpiredApprovals(s.app.deps);
    expect(ids.map((id) => s.app.store.payments.get(id)!.status)).toEqual(ids.map(() => 'failed'));
    expect(committed(agentId)).toBe(0n);
    // Logged once when it began, once when it was over.
    expect(logCount('a write failed, leaving payments in signing; they are released once writes succeed again') - logsBefore).toBe(1);
    expect(logCount('released payments a failed write had left in signing')).toBeGreaterThanOrEqual(1);

    // The repeat ends clearly; the nonces the lost signatures had are signed again, gap-free.
    const ended = await postSign(s.url, s.bootstrap.api_key, raw(agentId, '0.05'), 'full-3');
    expect(ended.status, ended.text).toBe(409);
    expect(ended.json.code).toBe('signing_failed');
    const nonces: number[] = [];
    for (let i = 0; i < 20; i++) nonces.push(await signedNonce(raw(agentId, '0.05'), `after-${i}`));
    expect(nonces).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(committed(agentId)).toBe(1_000_000n);
  });

  test('behavior: the next successful settle releases them without waiting for the sweep', async () => {
    const agentId = await agent({ cap: '1', threshold: '100' });
    const [id] = await strand(agentId, 'next', 1);
    writesFail(false);
    await signedNonce({ ...raw(agentId, '0.05'), chain_id: 8453 }, 'next-ok');
    expect(s.app.store.payments.get(id!)!.status).toBe('failed');
    expect(committed(agentId)).toBe(50_000n);
  });

  test('behavior: an approved payment whose settle failed goes back to approved, keeps its hold, and the agent collects it', async () => {
    const agentId = await agent({ cap: '1', threshold: '0.01' });
    const body: SignBody = { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.05' };
    const pending = await postSign(s.url, s.bootstrap.api_key, body, 'approved-full');
    expect(pending.status, pending.text).toBe(202);
    onSign(() => writesFail(true));
    // The decision is recorded; the signing after it could not be.
    const decided = await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE }, admin.auth);
    expect(decided.approval?.status).toBe(ApprovalStatus.APPROVED);
    restoreSigner!();
    expect(s.app.store.payments.get(pending.json.transaction_id)!.status).toBe('signing');

    writesFail(false);
    await sweepExpiredApprovals(s.app.deps);
    expect(s.app.store.payments.get(pending.json.transaction_id)!.status).toBe('approved');
    expect(committed(agentId)).toBe(50_000n);
    const collected = await postSign(s.url, s.bootstrap.api_key, body, 'approved-full');
    expect(collected.status, collected.text).toBe(200);
    expect(await recoverAuthorizationSigner(collected.json.signature as Hex, collected.json.authorization as WireAuthorization)).toBe(treasury);
    expect(committed(agentId)).toBe(50_000n);
  });
});
