import { getAddress, parseTransaction, recoverTransactionAddress, recoverTypedDataAddress, type Address, type Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { sweepExpiredApprovals } from '../../src/app/approvals/approvals.js';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { sqliteBuckets } from '../helpers/capBuckets.js';
import { postSign, recoverAuthorizationSigner, setPolicy, usdToMicros, type SignBody, type WireAuthorization } from '../helpers/payments.js';
import { PAY_TO, startX402Peer, type X402Peer } from '../helpers/peers.js';
import { startTestServer, type RestResult, type TestServer } from '../helpers/server.js';

/**
 * Hostile sequences against the hourly cap sums (migration 0010), on the real server on SQLite:
 * bursts of every payment type for one agent straddling hour boundaries, approvals approved,
 * denied, expired and collected in a later hour, signing failures (hold released), policy changes
 * mid-burst and clock jumps both ways across the 24 h window. After every step the ledger is
 * checked from outside the cap code: cap_buckets equals the per-hour sums of the holding rows
 * (computed here in JS), the store's committedSince equals the brute-force scan, the holding sum
 * in the window never passes the cap, and every signature recovers to the treasury with no
 * EIP-3009/Permit2 nonce or raw transaction nonce handed out twice.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const RECIPIENT = '0x90f79bf6eb2c4f870365e785982e1f101e93b906';

// A clock that runs with real time from wherever a step puts it.
// With `frozen`, it stands still (rows land on an exact millisecond).
let base = Date.now();
let setAt = Date.now();
let frozen = false;
const now = () => (frozen ? base : base + (Date.now() - setAt));
function setClock(t: number, freeze = false): void {
  base = t;
  setAt = Date.now();
  frozen = freeze;
}

let s: TestServer;
let admin: Admin;
let treasury: Address;
let x402: X402Peer;
const nonces = new Set<string>();
const rawNonces = new Set<string>();

beforeAll(async () => {
  x402 = await startX402Peer();
  s = await startTestServer({ dev: true, logLevel: 'warn', now, probeAllowHosts: [x402.host] });
  admin = adminFor(s);
  treasury = getAddress(s.bootstrap.treasury_address);
});
afterAll(async () => {
  await s?.close();
  await x402?.close();
});

type Kind = 'eip3009' | 'permit2' | 'raw_transaction' | 'x402';
function body(agentId: string, kind: Kind, amount: string, key = ''): SignBody {
  if (kind === 'x402') return { agent_id: agentId, type: 'x402', chain_id: 8453, recipient_address: PAY_TO, amount_usd: 0.01, payload: { resource_url: x402.url(`/paid?k=${key}`) } };
  return { agent_id: agentId, type: kind, chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amount, payload: {} };
}

/** A 200's signature recovers to the treasury, and its nonce was never handed out before. */
async function expectTreasurySigned(r: RestResult): Promise<void> {
  expect(r.status, r.text).toBe(200);
  if (r.json.raw_transaction) {
    const serialized = r.json.raw_transaction.serialized as Hex;
    expect(await recoverTransactionAddress({ serializedTransaction: serialized as `0x02${string}` })).toBe(treasury);
    const key = String(parseTransaction(serialized).nonce);
    expect(rawNonces.has(key), `raw nonce ${key} handed out twice`).toBe(false);
    rawNonces.add(key);
    return;
  }
  if (r.json.authorization) {
    const a = r.json.authorization as WireAuthorization;
    expect(await recoverAuthorizationSigner(r.json.signature as Hex, a)).toBe(treasury);
    expect(nonces.has(a.nonce), `nonce ${a.nonce} handed out twice`).toBe(false);
    nonces.add(a.nonce);
    return;
  }
  if (r.json.permit2) {
    const p = r.json.permit2;
    const signer = await recoverTypedDataAddress({
      domain: { name: 'Permit2', chainId: p.chain_id, verifyingContract: p.permit2_address },
      types: {
        PermitWitnessTransferFrom: [
          { name: 'permitted', type: 'TokenPermissions' }, { name: 'spender', type: 'address' },
          { name: 'nonce', type: 'uint256' }, { name: 'deadline', type: 'uint256' }, { name: 'witness', type: 'Witness' },
        ],
        TokenPermissions: [{ name: 'token', type: 'address' }, { name: 'amount', type: 'uint256' }],
        Witness: [{ name: 'to', type: 'address' }, { name: 'validAfter', type: 'uint256' }],
      },
      primaryType: 'PermitWitnessTransferFrom',
      message: {
        permitted: { token: p.token, amount: BigInt(p.amount) }, spender: p.spender, nonce: BigInt(p.nonce), deadline: BigInt(p.deadline),
        witness: { to: p.to, validAfter: BigInt(p.valid_after) },
      },
      signature: r.json.signature as Hex,
    });
    expect(signer).toBe(treasury);
    const key = `p2:${String(p.nonce)}`;
    expect(nonces.has(key), `permit2 nonce ${key} handed out twice`).toBe(false);
    nonces.add(key);
    return;
  }
  if (r.json.payment_header) {
    const payload = JSON.parse(Buffer.from(r.json.payment_header.value, 'base64').toString('utf8'));
    const auth = payload.payload?.authorization;
    if (auth) {
      expect(nonces.has(auth.nonce), `x402 nonce ${auth.nonce} handed out twice`).toBe(false);
      nonces.add(auth.nonce);
    }
  }
}

/** cap_buckets against the holding rows, per agent-hour; committedSince against a scan; the cap. */
function checkLedger(agentId: string, capMicros: bigint | undefined, label: string): bigint {
  const db = s.app.store.db;
  const rows = db.prepare('SELECT agent_id, cap_at, amount_micros FROM transactions WHERE holds_cap = 1').safeIntegers(true).all() as Array<{ agent_id: string; cap_at: bigint; amount_micros: bigint }>;
  const derived = new Map<string, bigint>();
  for (const r of rows) {
    const h = r.cap_at >= 0n ? r.cap_at / BigInt(HOUR) : -((-r.cap_at + BigInt(HOUR) - 1n) / BigInt(HOUR));
    const k = `${r.agent_id}|${h}`;
    derived.set(k, (derived.get(k) ?? 0n) + r.amount_micros);
  }
  const buckets = sqliteBuckets(db);
  const stored = new Map<string, bigint>();
  for (const b of buckets) if (b.total !== 0n) stored.set(`${b.agent_id}|${b.bucket}`, b.total);
  for (const [k, v] of derived) if (v === 0n) derived.delete(k);
  expect(Object.fromEntries(stored), `${label}: cap_buckets vs rows`).toEqual(Object.fromEntries(derived));
  const t = now();
  const since = t - DAY;
  const scan = (db.prepare(`SELECT COALESCE(SUM(amount_micros), 0) AS v FROM transactions WHERE agent_id = ? AND holds_cap = 1 AND cap_at > ?`).safeIntegers(true).get(agentId, since) as { v: bigint }).v
    - (db.prepare(`SELECT COALESCE(SUM(t.amount_micros), 0) AS v FROM approvals a JOIN transactions t ON t.id = a.transaction_id
      WHERE a.agent_id = ? AND a.status = 'pending' AND a.expires_at <= ? AND t.holds_cap = 1 AND t.cap_at > ?`).safeIntegers(true).get(agentId, t, since) as { v: bigint }).v;
  expect(s.app.store.payments.committedSince(agentId, since, t), `${label}: committedSince vs scan`).toBe(scan);
  // Every `since` a check could use in the last day, on and next to each hour boundary.
  for (let h = 0; h <= 25; h++) {
    for (const d of [-1, 0, 1]) {
      const at = Math.floor(since / HOUR) * HOUR + h * HOUR + d;
      const brute = (db.prepare('SELECT COALESCE(SUM(amount_micros), 0) AS v FROM transactions WHERE agent_id = ? AND holds_cap = 1 AND cap_at > ?')
        .safeIntegers(true).get(agentId, at) as { v: bigint }).v;
      const overdue = (db.prepare(`SELECT COALESCE(SUM(t.amount_micros), 0) AS v FROM approvals a JOIN transactions t ON t.id = a.transaction_id
        WHERE a.agent_id = ? AND a.status = 'pending' AND a.expires_at <= ? AND t.holds_cap = 1 AND t.cap_at > ?`).safeIntegers(true).get(agentId, t, at) as { v: bigint }).v;
      expect(s.app.store.payments.committedSince(agentId, at, t), `${label}: committedSince(${at})`).toBe(brute - overdue);
    }
  }
  if (capMicros !== undefined) expect(scan <= capMicros, `${label}: held ${scan} > cap ${capMicros}`).toBe(true);
  return scan;
}

async function newAgent(cap: string, threshold: string): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, 'capledger');
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT, PAY_TO.toLowerCase()], capUsd: cap, thresholdUsd: threshold });
  return agentId;
}

const KINDS: Kind[] = ['eip3009', 'permit2', 'raw_transaction', 'x402'];

describe('the hourly cap sums stay the ledger under attack (real server, SQLite)', () => {
  test('mixed-type bursts across an hour boundary: cap exact, buckets exact, signatures and nonces sound', async () => {
    const agentId = await newAgent('2', '5');
    const cap = usdToMicros('2');
    // Half the burst on the last millisecond of an hour, half on the first of the next.
    const H = Math.ceil(Date.now() / HOUR) * HOUR + 3 * HOUR;
    setClock(H - 1, true);
    const burstA = await Promise.all(Array.from({ length: 24 }, (_, i) => postSign(s.url, s.bootstrap.api_key, body(agentId, KINDS[i % 4]!, '0.07', `a1-${i}`), `a1-${i}`)));
    setClock(H, true);
    const burstB = await Promise.all(Array.from({ length: 24 }, (_, i) => postSign(s.url, s.bootstrap.api_key, body(agentId, KINDS[i % 4]!, '0.07', `b1-${i}`), `b1-${i}`)));
    const burst = [...burstA, ...burstB];
    const ok = burst.filter((r) => r.status === 200);
    for (const r of ok) await expectTreasurySigned(r);
    for (const r of burst) expect([200, 403], r.text).toContain(r.status);
    const held = checkLedger(agentId, cap, 'burst 1');
    expect(sqliteBuckets(s.app.store.db, 'agent_id = ? AND total != 0', agentId)).toHaveLength(2);
    // Nothing refused that would have fitted: what is left is less than the smallest payment.
    expect(cap - held < usdToMicros('0.07')).toBe(true);
    // Exactly 24 h after the first half: it has just stopped counting (cap_at > since), the second
    // half still counts; what is free is exactly the first half's amount.
    const heldB = burstB.reduce((sum, r, i) => sum + (r.status === 200 ? usdToMicros(KINDS[i % 4] === 'x402' ? '0.01' : '0.07') : 0n), 0n);
    setClock(H - 1 + DAY, true);
    expect(checkLedger(agentId, cap, 'first half out')).toBe(heldB);
    const fit = Number((cap - heldB) / usdToMicros('0.07'));
    const edge = await Promise.all(Array.from({ length: fit + 4 }, (_, i) => postSign(s.url, s.bootstrap.api_key, body(agentId, 'eip3009', '0.07'), `e1-${i}`)));
    expect(edge.filter((r) => r.status === 200)).toHaveLength(fit);
    for (const r of edge.filter((r) => r.status === 200)) await expectTreasurySigned(r);
    checkLedger(agentId, cap, 'edge refill');
    setClock(H + DAY);
    expect(checkLedger(agentId, cap, 'second half out')).toBe(usdToMicros('0.07') * BigInt(fit));
    setClock(H + DAY - 1 + DAY - 2_000);
    checkLedger(agentId, cap, 'just inside the window');
    setClock(now() + 5_000);
    expect(checkLedger(agentId, cap, 'window passed')).toBe(0n);
    const again = await Promise.all(Array.from({ length: 12 }, (_, i) => postSign(s.url, s.bootstrap.api_key, body(agentId, 'eip3009', '0.2'), `b2-${i}`)));
    expect(again.filter((r) => r.status === 200)).toHaveLength(10);
    for (const r of again.filter((r) => r.status === 200)) await expectTreasurySigned(r);
    checkLedger(agentId, cap, 'burst 2');

    // The clock jumps back 30 h: every row is now in the future and still counts (nothing freed).
    setClock(now() - 30 * HOUR);
    const back = await postSign(s.url, s.bootstrap.api_key, body(agentId, 'eip3009', '0.2'), 'back-1');
    expect(back.status, back.text).toBe(403);
    // Both bursts count now (each was allowed under the clock of its time): no cap assertion.
    checkLedger(agentId, undefined, 'clock back');
  });

  test('approvals approved, denied, expired, and an x402 one collected in a later hour', async () => {
    const agentId = await newAgent('1', '0.005');
    const cap = usdToMicros('1');
    setClock(Math.ceil(Date.now() / HOUR) * HOUR + 40 * HOUR - 20_000);
    const pend = await Promise.all(Array.from({ length: 8 }, (_, i) => postSign(s.url, s.bootstrap.api_key, body(agentId, i % 2 ? 'x402' : 'eip3009', '0.1', `ap-${i}`), `ap-${i}`)));
    for (const r of pend) expect(r.status, r.text).toBe(202);
    checkLedger(agentId, cap, 'pending');
    // eip3009 approvals sign at the decision; x402 ones wait for collection.
    for (const [i, d] of [[0, Decision.APPROVE], [1, Decision.APPROVE], [2, Decision.DENY], [3, Decision.APPROVE], [5, Decision.DENY], [7, Decision.APPROVE]] as const) {
      await admin.client.decideApproval({ id: pend[i]!.json.approval_request_id, decision: d }, admin.auth);
      checkLedger(agentId, cap, `decided ${i}`);
    }
    // Collect x402 #1 and #3 in the next hour (cap_at moves to the signing time, another bucket),
    // inside the 15-minute collection window.
    setClock(Math.ceil(now() / HOUR) * HOUR + 5_000);
    for (const i of [1, 3]) {
      const c = await postSign(s.url, s.bootstrap.api_key, body(agentId, 'x402', '0.1', `ap-${i}`), `ap-${i}`);
      await expectTreasurySigned(c);
      checkLedger(agentId, cap, `collected ${i}`);
    }
    // x402 #7 approved and never collected, eip3009 #4 and #6 still pending: past their windows
    // the pending ones are overdue (not counted) before the sweep; the sweep expires all three.
    setClock(now() + 8 * 24 * HOUR);
    checkLedger(agentId, cap, 'overdue');
    await sweepExpiredApprovals(s.app.deps);
    checkLedger(agentId, cap, 'swept');
    const left = s.app.store.db.prepare(`SELECT status, COUNT(*) AS n FROM transactions WHERE agent_id = ? GROUP BY status ORDER BY status`).all(agentId);
    expect(left).toEqual([{ status: 'denied', n: 2 }, { status: 'expired', n: 3 }, { status: 'signed', n: 3 }]);
  });

  test('signing fails for some payments of a burst: their holds come back out of the buckets', async () => {
    const agentId = await newAgent('1', '5');
    const cap = usdToMicros('1');
    setClock(Math.ceil(Date.now() / HOUR) * HOUR + 80 * HOUR - 100);
    const signer = s.app.deps.signer;
    const real = signer.sign;
    let n = 0;
    signer.sign = (job) => (n++ % 3 === 0 ? Promise.reject(new Error('injected signing failure')) : real.call(signer, job));
    try {
      const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => postSign(s.url, s.bootstrap.api_key, body(agentId, KINDS[i % 3]!, '0.05'), `sf-${i}`)));
      for (const r of burst.filter((r) => r.status === 200)) await expectTreasurySigned(r);
      checkLedger(agentId, cap, 'signing failures');
    } finally {
      signer.sign = real;
    }
    // The freed amount is usable again, exactly.
    const held = checkLedger(agentId, cap, 'before refill');
    const fits = Number((cap - held) / usdToMicros('0.05'));
    const refill = await Promise.all(Array.from({ length: fits + 3 }, (_, i) => postSign(s.url, s.bootstrap.api_key, body(agentId, 'eip3009', '0.05'), `rf-${i}`)));
    expect(refill.filter((r) => r.status === 200)).toHaveLength(fits);
    checkLedger(agentId, cap, 'refill');
  });

  test('the cap is lowered and raised in the middle of a burst', async () => {
    const agentId = await newAgent('3', '5');
    setClock(Math.ceil(Date.now() / HOUR) * HOUR + 120 * HOUR - 80);
    const burst = Array.from({ length: 40 }, (_, i) => postSign(s.url, s.bootstrap.api_key, body(agentId, KINDS[i % 3]!, '0.1'), `pc-${i}`));
    await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '0.5', thresholdUsd: '5' });
    await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '3', thresholdUsd: '5' });
    const rs = await Promise.all(burst);
    for (const r of rs.filter((r) => r.status === 200)) await expectTreasurySigned(r);
    checkLedger(agentId, usdToMicros('3'), 'policy changes');
  });
});
