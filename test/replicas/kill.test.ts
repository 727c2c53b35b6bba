import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createAgent } from '../helpers/admin.js';
import { listAllTransactions, postSign, setPolicy, usdToMicros, type SignBody } from '../helpers/payments.js';
import type { RestResult } from '../helpers/server.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * kill -9 of one replica mid-load while the two others carry on (README, PostgreSQL and replicas): no
 * acknowledged payment is lost, nothing is paid twice, and a client that retries on another replica
 * with the same Idempotency-Key gets one outcome, the same on every replica it asks afterwards.
 * Rows the dead replica left in `signing` are failed by the surviving replicas' upkeep once older
 * than PAYPOLICY_STALE_SIGNING_MS (shortened here), exactly as a restart fails them on SQLite.
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';
const STALE_MS = 3000;

let c: Cluster;

beforeAll(async () => {
  c = await startCluster({ replicas: 3, env: { PAYPOLICY_STALE_SIGNING_MS: String(STALE_MS) }, args: ['--max-in-flight', '500'] });
}, 120_000);
afterAll(async () => c?.close(), 60_000);

function pay(agentId: string): SignBody {
  return { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.01' };
}

type Outcome = { status: number; txId?: string; signature?: string; code?: string };
const outcomeOf = (r: RestResult): Outcome => ({ status: r.status, txId: r.json?.transaction_id, signature: r.json?.signature, code: r.json?.code });

test('kill -9 of one replica mid-load: acknowledged payments kept, no double spend, retries elsewhere get one outcome', async () => {
  const agentId = await createAgent(c.admin(0), c.bootstrap.org_id, 'kill');
  // Cap $3.00 at $0.01 each: 300 fit, 400 are sent; the cap is part of what must hold.
  await setPolicy(c.admin(0), agentId, { allowlist: [RECIPIENT], capUsd: '3.00', thresholdUsd: '1' });
  const TOTAL = 400;
  const CLIENTS = 40;
  const acked = new Map<string, Outcome>(); // key → the first answer a client received
  const final = new Map<string, Outcome>();
  let sent = 0;
  let killed = false;
  let cut = 0;
  const live = () => c.replicas.filter((r) => r.child.exitCode === null && r.child.signalCode === null);

  async function client(n: number): Promise<void> {
    for (let i = n; i < TOTAL; i += CLIENTS) {
      const key = `kill-${i}`;
      let replica = i % 3;
      for (let attempt = 0; ; attempt++) {
        sent++;
        const target = killed && replica === 0 ? 1 + (i % 2) : replica;
        let r: RestResult;
        try {
          const answer = postSign(c.replicas[target]!.url, c.bootstrap.api_key, pay(agentId), key);
          // Killed while this request is on its way to (or inside) replica 0, so at least one
          // request is certainly cut off: a kill between requests could find none in flight.
          if (target === 0 && sent >= 120 && !killed) {
            killed = true;
            void c.kill(0);
          }
          r = await answer;
        } catch {
          // The connection died with the replica: the same key, on another replica.
          cut++;
          replica = 1 + (i % 2);
          continue;
        }
        if (r.status === 409 && r.json?.code === 'in_progress' && attempt < 400) {
          // Another replica (the dead one) holds the row in signing until the upkeep fails it.
          await new Promise((res) => setTimeout(res, 50));
          continue;
        }
        if (r.status >= 500 && attempt < 400) {
          await new Promise((res) => setTimeout(res, 50));
          continue;
        }
        if (!acked.has(key)) acked.set(key, outcomeOf(r));
        final.set(key, outcomeOf(r));
        break;
      }
    }
  }
  await Promise.all(Array.from({ length: CLIENTS }, (_, n) => client(n)));
  expect(killed).toBe(true);
  // Requests were in flight on the killed replica and were cut off (then retried elsewhere).
  expect(cut).toBeGreaterThan(0);
  expect(live()).toHaveLength(2);

  const ok = [...final.entries()].filter(([, o]) => o.status === 200);
  // Every key got an answer a client can act on: signed, denied by the cap, or failed (cut off mid-signing).
  for (const [key, o] of final) {
    expect([200, 403, 422].includes(o.status) || o.code === 'signing_failed', `${key}: ${JSON.stringify(o)}`).toBe(true);
  }
  // The ledger: one row per key at most; every 200 is a signed row with that signature; the cap held.
  const rows = await listAllTransactions(c.admin(1), c.bootstrap.org_id, agentId);
  const signed = rows.filter((t) => t.status === 'signed');
  expect(new Set(rows.map((t) => t.id)).size).toBe(rows.length);
  expect(rows.length).toBeLessThanOrEqual(TOTAL);
  expect(new Set(signed.map((t) => t.id))).toEqual(new Set(ok.map(([, o]) => o.txId!)));
  expect(signed.reduce((s, t) => s + usdToMicros(t.amountUsd), 0n)).toBeLessThanOrEqual(3_000_000n);
  expect(rows.filter((t) => t.status === 'signing')).toEqual([]);
  // Asked again on each surviving replica, every key answers what its client was last told.
  for (const [key, o] of [...final.entries()].filter((_, i) => i % 7 === 0)) {
    for (const r of live()) {
      const again = outcomeOf(await postSign(r.url, c.bootstrap.api_key, pay(agentId), key));
      expect(again.txId, key).toBe(o.txId);
      if (o.status === 200) {
        expect(again.signature).toBe(o.signature);
      } else {
        expect(again.status).toBe(o.status);
      }
    }
  }
  // The killed replica comes back on the same database and agrees.
  const back = await c.start(0);
  const [someKey, someOutcome] = ok[0]!;
  const replay = outcomeOf(await postSign(back.url, c.bootstrap.api_key, pay(agentId), someKey));
  expect(replay).toMatchObject({ status: 200, txId: someOutcome.txId, signature: someOutcome.signature });
}, 240_000);

test('kill -9 mid-load of raw transactions: rows it left in signing are failed by the others once stale, nonces stay unique and gap-free', async () => {
  // The replica killed by the previous test is back as replica 0 (it rejoined the cluster).
  const agentId = await createAgent(c.admin(1), c.bootstrap.org_id, 'kill-raw');
  await setPolicy(c.admin(1), agentId, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '1000' });
  const body = { agent_id: agentId, type: 'raw_transaction', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.01' };
  const TOTAL = 240;
  const final = new Map<string, Outcome>();
  let sent = 0;
  let killed = false;
  let cut = 0;
  await Promise.all(Array.from({ length: 30 }, async (_, n) => {
    for (let i = n; i < TOTAL; i += 30) {
      const key = `raw-${i}`;
      let replica = i % 3;
      for (let attempt = 0; ; attempt++) {
        if (++sent === 80 && !killed) {
          killed = true;
          void c.kill(0);
        }
        const target = killed && replica === 0 ? 1 + (i % 2) : replica;
        let r: RestResult;
        try {
          r = await postSign(c.replicas[target]!.url, c.bootstrap.api_key, body, key);
        } catch {
          cut++;
          replica = 1 + (i % 2);
          continue;
        }
        if ((r.status === 409 && r.json?.code === 'in_progress') || (r.status >= 500 && attempt < 400)) {
          await new Promise((res) => setTimeout(res, 100));
          continue;
        }
        final.set(key, outcomeOf(r));
        break;
      }
    }
  }));
  expect(cut).toBeGreaterThan(0);
  for (const [key, o] of final) expect(o.status === 200 || o.code === 'signing_failed', `${key}: ${JSON.stringify(o)}`).toBe(true);
  const db = new pg.Client({ connectionString: c.db.url });
  await db.connect();
  try {
    const org = c.bootstrap.org_id;
    const rows = (await db.query<{ id: string; status: string; nonce: string | null }>(
      "SELECT id, status, nonce::text FROM transactions WHERE agent_id = $1", [agentId])).rows;
    expect(rows.filter((r) => r.status === 'signing')).toEqual([]);
    const signed = rows.filter((r) => r.status === 'signed').map((r) => Number(r.nonce));
    expect(new Set(signed).size).toBe(signed.length);
    // Every 200 is a signed row; every signing_failed key is a failed row (cut off on the dead replica).
    expect(new Set(rows.filter((r) => r.status === 'signed').map((r) => r.id))).toEqual(new Set([...final.values()].filter((o) => o.status === 200).map((o) => o.txId)));
    const released = (await db.query<{ nonce: string }>('SELECT nonce::text FROM released_nonces WHERE org_id = $1 AND chain_id = 8453', [org])).rows.map((r) => Number(r.nonce));
    const next = Number((await db.query<{ n: string }>('SELECT next_nonce::text AS n FROM account_nonces WHERE org_id = $1 AND chain_id = 8453', [org])).rows[0]!.n);
    const allSigned = (await db.query<{ nonce: string }>("SELECT nonce::text FROM transactions WHERE org_id = $1 AND chain_id = 8453 AND status = 'signed' AND nonce IS NOT NULL", [org])).rows.map((r) => Number(r.nonce));
    // Gap-free: the counter's range is exactly the signed nonces plus those handed back for reuse.
    expect([...allSigned, ...released].sort((a, b) => a - b)).toEqual(Array.from({ length: next }, (_, i) => i));
  } finally {
    await db.end();
  }
}, 240_000);
