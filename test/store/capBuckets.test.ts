import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { createApprovalStore } from '../../src/store/approvals.js';
import { openDatabase, type Db } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { createPaymentStore } from '../../src/store/payments.js';
import type { PaymentRow, StoreTables } from '../../src/store/port.js';
import { repairStaleSigning } from '../../src/store/pg/cluster.js';
import { migratePg } from '../../src/store/pg/migrate.js';
import { migrateStore } from '../../src/store/pg/migrateStore.js';
import { TYPES } from '../../src/store/pg/sql.js';
import { createPgStore } from '../../src/store/pg/store.js';
import { createTransactionStore } from '../../src/store/transactions.js';
import { createCapRowsMover } from '../../src/store/capRows.js';
import { CAP_BUCKETS_UNION } from '../../src/store/migrations/0012_cap_buckets_hot.js';
import { createSpendStore } from '../../src/store/spend.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pgDatabase.js';

/**
 * committedSince reads per-agent hourly sums (cap_buckets, migration 0010, kept by triggers) plus
 * the rows of the one hour `since` falls in. Here, on both stores: random sequences of inserts and
 * every legal state move (through the store API; raw SQL only for what a background path or an
 * operator does to cap_at, amounts, agents and rows), cap_at across hour boundaries, before 1970,
 * in the future and moved backwards, then committedSince equals the brute-force sum over the rows
 * for many `since` (exact hour boundaries and their neighbours included) and `now`, and the buckets
 * equal the rows' sums per agent-hour computed here.
 */

const H = 3_600_000;
const T0 = 480_000 * H; // 2024-10-04T00:00:00Z, an hour boundary
const BIG = 9_007_199_254_740_993n; // 2^53 + 1
const ORG = 'org_cap';
const AGENTS = ['agt_a', 'agt_b', 'agt_c'];

type Tables = Pick<StoreTables, 'payments' | 'approvals' | 'transactions'>;
/** A SQLite repository with each method made async, as the store's own wrapper makes it (syncTables.ts). */
type AsyncOf<T> = { [K in keyof T]: T[K] extends (...a: infer A) => infer R ? (...a: A) => Promise<R> : never };
type Harness = {
  name: 'sqlite' | 'pg';
  t: Tables;
  /** Runs SQL written with `?` placeholders; returns the rows. */
  rows<R>(sql: string, params?: unknown[]): Promise<R[]>;
  run(sql: string, params?: unknown[]): Promise<void>;
  /** Runs `fn` with raw SQL on one connection (for BEGIN ... ROLLBACK). */
  oneConnection(fn: (c: Pick<Harness, 'run' | 'rows'>) => Promise<void>): Promise<void>;
  /** PostgreSQL only: the stale-signing repair (a background path that moves cap_at in raw SQL). */
  repairStale?(cutoff: number, now: number): Promise<void>;
  /** SQLite only: the cap-rows mover (migration 0011) raising the horizon towards `target`. */
  advanceHorizon?(target: number, limit: number): Promise<number>;
  /** SQLite only: the mover's fold of the hot buckets (migration 0012) for a clock reading `now`. */
  foldHot?(now: number): Promise<number>;
  /** SQLite only: the dashboard's per-bucket sums (spend.ts), which read cap_rows and the time index too. */
  spendSince?(agentId: string, since: number, sizeMs: number, count: number): Promise<bigint[]>;
  close(): Promise<void>;
};

function wrap<T extends object>(table: T): AsyncOf<T> {
  const out: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(table)) {
    if (typeof fn === 'function') out[name] = async (...a: unknown[]) => (fn as (...a: unknown[]) => unknown)(...a);
  }
  return out as AsyncOf<T>;
}

const dirs: string[] = [];
const dbs: TestDatabase[] = [];
afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const d of dbs) await d.drop();
});

function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-capbuckets-'));
  dirs.push(dir);
  return join(dir, 'paypolicy.db');
}

function sqliteRaw(db: Db | Database.Database) {
  return {
    async rows<R>(sql: string, params: unknown[] = []): Promise<R[]> {
      return db.prepare(sql).safeIntegers(true).all(...params) as R[];
    },
    async run(sql: string, params: unknown[] = []): Promise<void> {
      db.prepare(sql).run(...params);
    },
  };
}

function pgRaw(q: (text: string, values: unknown[]) => Promise<{ rows: unknown[] }>) {
  const text = (sql: string) => {
    let n = 0;
    return sql.replace(/\?/g, () => `$${++n}`);
  };
  const values = (params: unknown[]) => params.map((v) => (typeof v === 'bigint' ? v.toString() : v));
  return {
    async rows<R>(sql: string, params: unknown[] = []): Promise<R[]> {
      return (await q(text(sql), values(params))).rows as R[];
    },
    async run(sql: string, params: unknown[] = []): Promise<void> {
      await q(text(sql), values(params));
    },
  };
}

/** The hour the SQLite harness's hot buckets start at: below every row, so folds move it through them. */
const HOT_FROM = Math.floor(T0 / H) - 40;

async function openSqlite(): Promise<Harness> {
  const db = openDatabase(tempFile());
  // Nothing is written yet, so any line is consistent; the clock's (now) is past every row here.
  db.prepare('UPDATE cap_hot_from SET bucket = ?').run(HOT_FROM);
  const mover = createCapRowsMover(db);
  const spend = createSpendStore(db);
  return {
    name: 'sqlite',
    advanceHorizon: async (target, limit) => mover.advance(target, limit),
    foldHot: async (now) => mover.fold(now),
    spendSince: async (agentId, since, sizeMs, count) => spend.bucketsSince(agentId, since, sizeMs, count),
    t: { payments: wrap(createPaymentStore(db)), approvals: wrap(createApprovalStore(db)), transactions: wrap(createTransactionStore(db)) },
    ...sqliteRaw(db),
    oneConnection: (fn) => fn(sqliteRaw(db)),
    async close() {
      db.close();
    },
  };
}

async function openPg(): Promise<Harness> {
  const d = await createTestDatabase();
  dbs.push(d);
  const store = await createPgStore({ connectionString: d.url, poolSize: 2 });
  return {
    name: 'pg',
    t: store,
    ...pgRaw((text, values) => store.pool.query(text, values)),
    async oneConnection(fn) {
      const c = await store.pool.connect();
      try {
        await fn(pgRaw((text, values) => c.query(text, values)));
      } finally {
        c.release();
      }
    },
    async repairStale(cutoff, now) {
      await repairStaleSigning(store.pool, cutoff, now);
    },
    close: () => store.close(),
  };
}

/** Organization and agents, in raw SQL that schema 0009 and later accept on both engines. */
async function seed(h: Pick<Harness, 'run'>): Promise<void> {
  await h.run('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)', [ORG, 'Cap', 3600, T0]);
  for (const id of AGENTS) {
    await h.run('INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)', [id, ORG, id, 'active', T0, T0]);
  }
}

/** A small seeded PRNG (mulberry32), so a failing sequence can be replayed from its seed. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  /** A time near an hour boundary (on it, a millisecond either side) or anywhere in an hour, within ±30 h of T0; now and then before 1970. */
  const time = () => {
    const hour = next() < 0.05 ? int(-3, 0) : int(-30, 30);
    const within = pick([0, 1, -1, int(0, H - 1), H - 1]);
    return (next() < 0.05 ? 0 : T0) + hour * H + within;
  };
  const amount = () => (next() < 0.03 ? BIG : next() < 0.1 ? 0n : BigInt(int(1, 5_000_000)));
  return { next, int, pick, time, amount };
}

type Rng = ReturnType<typeof prng>;
type RowState = { id: string; agent_id: string; status: string; approval_id: string | null; submit_status: string | null; cap_at: bigint | string };

/** floor(x / H) for an integer of any sign, as a bigint. */
function hourOf(x: bigint): bigint {
  const q = x / BigInt(H);
  return x < 0n && q * BigInt(H) !== x ? q - 1n : q;
}

/** What committedSince computed before cap_buckets: the full scan, less overdue approvals. */
async function bruteForce(h: Harness, agentId: string, since: number, now: number): Promise<bigint> {
  const [held] = await h.rows<{ total: unknown }>(
    'SELECT CAST(COALESCE(SUM(amount_micros), 0) AS BIGINT) AS total FROM transactions WHERE agent_id = ? AND holds_cap = 1 AND cap_at > ?', [agentId, since]);
  const [overdue] = await h.rows<{ total: unknown }>(`SELECT CAST(COALESCE(SUM(t.amount_micros), 0) AS BIGINT) AS total FROM approvals a
    JOIN transactions t ON t.id = a.transaction_id
    WHERE a.agent_id = ? AND a.status = 'pending' AND a.expires_at <= ? AND t.holds_cap = 1 AND t.cap_at > ?`, [agentId, now, since]);
  return BigInt(String(held!.total)) - BigInt(String(overdue!.total));
}

/** Where a store's buckets are read from: SQLite's are two tables (migration 0012). */
const bucketsOf = (h: Pick<Harness, 'name'>): string => (h.name === 'sqlite' ? CAP_BUCKETS_UNION : 'cap_buckets');

/** The buckets (zero totals aside) must be the rows' sums per agent and floored hour, computed here. */
async function expectBucketsExact(h: Harness, label: string): Promise<void> {
  const rows = await h.rows<{ agent_id: string; cap_at: unknown; amount_micros: unknown }>(
    'SELECT agent_id, cap_at, amount_micros FROM transactions WHERE holds_cap = 1');
  const want = new Map<string, bigint>();
  for (const r of rows) {
    const k = `${r.agent_id}|${hourOf(BigInt(String(r.cap_at)))}`;
    want.set(k, (want.get(k) ?? 0n) + BigInt(String(r.amount_micros)));
  }
  const have = new Map<string, bigint>();
  if (h.name === 'sqlite') {
    // Split at the line, each agent-hour on one side only (migration 0012).
    const [misplaced] = await h.rows<{ n: unknown }>(`SELECT
        (SELECT count(*) FROM cap_buckets WHERE bucket >= (SELECT bucket FROM cap_hot_from))
      + (SELECT count(*) FROM cap_buckets_hot WHERE bucket < (SELECT bucket FROM cap_hot_from))
      + (SELECT count(*) FROM cap_buckets c JOIN cap_buckets_hot USING (agent_id, bucket)) AS n`);
    expect(BigInt(String(misplaced!.n)), `${label}: hot and cold buckets split at the line`).toBe(0n);
  }
  for (const b of await h.rows<{ agent_id: string; bucket: unknown; total: unknown }>(`SELECT agent_id, bucket, total FROM ${bucketsOf(h)}`)) {
    have.set(`${b.agent_id}|${BigInt(String(b.bucket))}`, BigInt(String(b.total)));
  }
  const nonZero = (m: Map<string, bigint>) => [...m].filter(([, v]) => v !== 0n).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  expect(nonZero(have), `${h.name} ${label}: cap_buckets`).toEqual(nonZero(want));
}

/**
 * SQLite: cap_rows holds exactly the holding rows at or below the horizon (migration 0011), and the
 * dashboard's bucket sums (which read cap_rows below it and the time index above it) equal the rows'.
 */
async function expectCapRowsExact(h: Harness, rng: Rng, label: string): Promise<void> {
  if (!h.advanceHorizon) return;
  const key = (r: { agent_id: string; cap_at: unknown; id: string; amount_micros: unknown }) => `${r.agent_id}|${String(r.cap_at)}|${r.id}|${String(r.amount_micros)}`;
  const want = (await h.rows<{ agent_id: string; cap_at: unknown; id: string; amount_micros: unknown }>(
    'SELECT agent_id, cap_at, id, amount_micros FROM transactions WHERE holds_cap = 1 AND cap_at <= (SELECT horizon FROM cap_horizon)')).map(key).sort();
  const have = (await h.rows<{ agent_id: string; cap_at: unknown; id: string; amount_micros: unknown }>(
    'SELECT agent_id, cap_at, id, amount_micros FROM cap_rows')).map(key).sort();
  expect(have, `${label}: cap_rows`).toEqual(want);
  for (const agentId of AGENTS) {
    const since = rng.time();
    const size = rng.pick([1, 1000, H, 7 * H]);
    const count = rng.int(1, 40);
    const rows = await h.rows<{ cap_at: unknown; amount_micros: unknown }>(
      'SELECT cap_at, amount_micros FROM transactions WHERE agent_id = ? AND holds_cap = 1 AND cap_at > ?', [agentId, since]);
    const expected = Array.from({ length: count }, () => 0n);
    for (const r of rows) {
      const k = (BigInt(String(r.cap_at)) - BigInt(since) - 1n) / BigInt(size);
      expected[Math.min(Number(k), count - 1)]! += BigInt(String(r.amount_micros));
    }
    expect(await h.spendSince!(agentId, since, size, count), `${label}: spend(${agentId}, ${since}, ${size}, ${count})`).toEqual(expected);
  }
}

/** committedSince against the brute force for many `since` (boundaries, their neighbours, row times, negative) and `now`. */
async function expectCommittedExact(h: Harness, rng: Rng, label: string): Promise<number> {
  const rows = await h.rows<{ cap_at: unknown }>('SELECT cap_at FROM transactions');
  const sinces = new Set<number>([0, -1, -H, -H - 1, -H + 1, T0, T0 - 24 * H, T0 + 31 * H]);
  for (let i = 0; i < 12; i++) {
    const edge = T0 + rng.int(-32, 32) * H;
    sinces.add(edge).add(edge - 1).add(edge + 1);
  }
  for (let i = 0; i < 6 && rows.length > 0; i++) {
    const at = Number(BigInt(String(rng.pick(rows).cap_at)));
    sinces.add(at).add(at - 1).add(at + 1);
  }
  for (let i = 0; i < 4; i++) sinces.add(rng.time());
  let checked = 0;
  for (const agentId of AGENTS) {
    for (const since of sinces) {
      const now = rng.next() < 0.5 ? since + 24 * H : rng.time();
      const got = await h.t.payments.committedSince(agentId, since, now);
      expect(got, `${h.name} ${label}: committedSince(${agentId}, ${since}, ${now})`).toBe(await bruteForce(h, agentId, since, now));
      checked++;
    }
  }
  return checked;
}

function paymentRow(n: number, agentId: string, status: 'signing' | 'signed' | 'pending_approval' | 'denied', at: number, amount: bigint, approvalId: string | null):
  PaymentRow & { status: 'signing' | 'signed' | 'pending_approval' | 'denied' } {
  return {
    id: `tx_${String(n).padStart(5, '0')}`, orgId: ORG, agentId, type: n % 4 === 0 ? 'raw_transaction' : 'eip3009', status, chainId: 8453,
    recipient: '0x' + '22'.repeat(20), amountMicros: amount, reason: '', serviceSlug: '', resourceUrl: 'https://example.com/r',
    idempotencyKey: `key-${n}`, requestHash: `hash-${n}`, request: '{}', result: status === 'signed' ? '{}' : null, approvalId, createdAt: at,
  };
}

/** One random step: a new row, a legal move of an existing row, a start-up repair, or a raw write. */
async function step(h: Harness, rng: Rng, n: number): Promise<void> {
  const now = rng.time();
  const existing = await h.rows<RowState>('SELECT id, agent_id, status, approval_id, submit_status, cap_at FROM transactions');
  const roll = rng.next();
  if (existing.length === 0 || roll < 0.3) {
    const agentId = rng.pick(AGENTS);
    const at = rng.time();
    const status = rng.pick(['signing', 'signed', 'signed', 'pending_approval', 'denied'] as const);
    if (rng.next() < 0.05) {
      await h.t.transactions.insert({ id: `ping_${n}`, orgId: ORG, agentId, type: 'ping', status: 'recorded', chainId: 0, recipient: '',
        amountMicros: 0n, reason: '', serviceSlug: '', approvalId: null, createdAt: at });
      return;
    }
    const approvalId = status === 'pending_approval' ? `apr_${n}` : null;
    await h.t.payments.insert(paymentRow(n, agentId, status, at, rng.amount(), approvalId));
    if (approvalId) {
      await h.t.approvals.insert({ id: approvalId, orgId: ORG, agentId, transactionId: paymentRow(n, agentId, status, at, 0n, null).id, status: 'pending',
        createdAt: at, expiresAt: at + rng.int(-2, 3) * H, decidedAt: null, decidedBy: '', note: '' });
    }
    return;
  }
  // Mostly rows that can still move, so long paths (pending → approved → signing → signed → reverted) happen.
  const live = existing.filter((r) => ['signing', 'pending_approval', 'approved'].includes(r.status) || r.submit_status === 'pending');
  const row = live.length > 0 && rng.next() < 0.7 ? rng.pick(live) : rng.pick(existing);
  const p = h.t.payments;
  if (roll < 0.8) {
    switch (row.status) {
      case 'signing': {
        const r = rng.next();
        if (r < 0.5) await p.settleSigned(row.id, '{}', now, rng.next() < 0.5);
        else if (r < 0.75) await p.markFailed(row.id, 'x', now);
        else await p.releaseSigning(row.id, 'x', now);
        return;
      }
      case 'pending_approval': {
        const r = rng.next();
        if (r < 0.6) {
          await h.t.approvals.decide(row.approval_id!, 'approved', now, 'owner', '');
          if (r < 0.3) await p.startSigningApproved(row.id, now);
          else await p.markApproved(row.id, now);
        } else if (r < 0.8) {
          await h.t.approvals.decide(row.approval_id!, 'denied', now, 'owner', '');
          await p.releasePending(row.id, 'denied', 'no', now);
        } else {
          await h.t.approvals.expire(row.approval_id!);
          await p.releasePending(row.id, 'expired', 'late', now);
        }
        return;
      }
      case 'approved': {
        const r = rng.next();
        if (r < 0.6) await p.startSigningFromApproved(row.id, '{}', now);
        else if (r < 0.8) await p.expireApproved(row.id, rng.time(), 'late', now);
        else await p.denyApproved(row.id, 'changed', now);
        return;
      }
      case 'signed': {
        if (row.submit_status === 'pending') {
          await p.markAccepted(row.id, `0x${n.toString(16)}`, false, now);
          const mined = { hash: `0x${n.toString(16)}`, blockNumber: 1, confirmations: 1, networkFeeWei: '1' };
          if (rng.next() < 0.7) await p.markReverted(row.id, mined, 'receipt status 0', now);
          else await p.markConfirmed(row.id, mined, now);
        } else {
          await p.noteReason(row.id, 'noted', now);
        }
        return;
      }
      default:
        // A final state (or failed): the start-up repairs, which move many rows at once.
        if (rng.next() < 0.5) await p.reopenFailedApprovals(rng.time(), 'too old', now);
        else if (rng.next() < 0.5) await p.reapproveInterrupted(now);
        else await p.failInterrupted(now);
        return;
    }
  }
  // Raw writes: what a background path or an operator may do to the columns the buckets follow.
  const r = rng.next();
  if (r < 0.35) await h.run('UPDATE transactions SET cap_at = ? WHERE id = ?', [rng.time(), row.id]);
  else if (r < 0.55) await h.run('UPDATE transactions SET amount_micros = ? WHERE id = ?', [rng.amount(), row.id]);
  else if (r < 0.7) await h.run('UPDATE transactions SET agent_id = ?, cap_at = ? WHERE id = ?', [rng.pick(AGENTS), rng.time(), row.id]);
  else if (r < 0.8 && row.approval_id === null) {
    await h.run('DELETE FROM chain_attempts WHERE transaction_id = ?', [row.id]);
    await h.run('DELETE FROM transactions WHERE id = ?', [row.id]);
  } else if (r < 0.9 && h.repairStale) await h.repairStale(rng.time(), now);
  else await h.run('UPDATE transactions SET cap_at = cap_at, amount_micros = amount_micros, holds_cap = holds_cap WHERE id = ?', [row.id]);
}

describe.each([
  ['sqlite', openSqlite],
  ['pg', openPg],
] as const)('committedSince with cap_buckets (%s)', (name, open) => {
  test('behavior: equals the brute-force sum after random moves across hour boundaries, for every since and now', async () => {
    const h = await open();
    try {
      await seed(h);
      const seeds = [1, 2, 3, 0xc0ffee];
      let checked = 0;
      let n = 0;
      let copied = 0;
      let horizon = T0 - 31 * H;
      let hotNow = HOT_FROM * H;
      let folded = 0;
      const seen = new Set<string>();
      for (const seed of seeds) {
        const rng = prng(seed);
        // The horizon's own generator, so PostgreSQL's sequences stay what they were.
        const moves = prng(seed ^ 0x0c4b);
        // And the hot line's: it creeps up through the rows' hours over the four seeds.
        const folds = prng(seed ^ 0x40f);
        for (let i = 0; i < 120; i++) {
          await step(h, rng, ++n);
          if (h.foldHot && folds.next() < 0.15) {
            hotNow += folds.int(0, 2) * (H / 2) + folds.pick([0, 1, -1]);
            // Sometimes a clock that went back: the line follows it down, then up again.
            folded += await h.foldHot(folds.next() < 0.1 ? hotNow - 3 * H : hotNow);
          }
          if (h.advanceHorizon && moves.next() < 0.25) {
            // Mostly creeping up through the rows' hours (a row's exact time now and then), so
            // rows keep landing on both sides; sometimes a target below the horizon (a no-op).
            horizon += moves.int(0, 2) * (H / 4) + moves.pick([0, 1, -1]);
            copied += await h.advanceHorizon(moves.next() < 0.1 ? horizon - H : horizon, moves.int(1, 8));
          }
          for (const r of await h.rows<{ status: string }>('SELECT DISTINCT status FROM transactions')) seen.add(r.status);
          if (i % 20 === 19) {
            await expectBucketsExact(h, `seed ${seed} step ${i}`);
            await expectCapRowsExact(h, moves, `seed ${seed} step ${i}`);
            checked += await expectCommittedExact(h, rng, `seed ${seed} step ${i}`);
          }
        }
      }
      // The sequences reach every state, so every move the triggers follow was taken.
      expect([...seen].sort(), name).toEqual(['approved', 'denied', 'expired', 'failed', 'pending_approval', 'recorded', 'reverted', 'signed', 'signing']);
      expect(checked).toBeGreaterThan(2000);
      if (h.advanceHorizon) {
        // The mover copied rows, and rows sit on both sides of the final horizon.
        const [split] = await h.rows<{ below: bigint; above: bigint }>(`SELECT (SELECT count(*) FROM cap_rows) AS below,
          (SELECT count(*) FROM transactions WHERE holds_cap = 1 AND cap_at > (SELECT horizon FROM cap_horizon)) AS above`);
        expect(copied).toBeGreaterThan(10);
        expect(split!.below).toBeGreaterThan(10n);
        expect(split!.above).toBeGreaterThan(10n);
        // Folds moved buckets, and buckets sit on both sides of the final line.
        const [tables] = await h.rows<{ cold: bigint; hot: bigint }>('SELECT (SELECT count(*) FROM cap_buckets) AS cold, (SELECT count(*) FROM cap_buckets_hot) AS hot');
        expect(folded).toBeGreaterThan(10);
        expect(tables!.cold).toBeGreaterThan(10n);
        expect(tables!.hot).toBeGreaterThan(10n);
      }
    } finally {
      await h.close();
    }
  }, 120_000);

  test('behavior: a write that rolls back leaves the buckets as they were', async () => {
    const h = await open();
    try {
      await seed(h);
      await h.t.payments.insert(paymentRow(1, 'agt_a', 'signed', T0 + 5, 700n, null));
      const before = await h.rows(`SELECT agent_id, bucket, total FROM ${bucketsOf(h)} ORDER BY agent_id, bucket`);
      // A second insert of the same id fails after the first statement of its transaction added to a bucket.
      const tx = `INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
        VALUES (?, ?, 'agt_a', 'eip3009', 'signing', 300, 1, ?, 0, 0)`;
      await h.oneConnection(async (c) => {
        await c.run('BEGIN');
        await c.run(tx, ['tx_new', ORG, T0 + 6]);
        expect((await c.rows<{ total: unknown }>(`SELECT total FROM ${bucketsOf(h)} WHERE agent_id = 'agt_a'`)).map((r) => String(r.total))).toEqual(['1000']);
        await expect(c.run(tx, ['tx_00001', ORG, T0 + 7])).rejects.toThrow();
        await c.run('ROLLBACK');
      });
      expect(await h.rows(`SELECT agent_id, bucket, total FROM ${bucketsOf(h)} ORDER BY agent_id, bucket`)).toEqual(before);
      expect(await h.t.payments.committedSince('agt_a', T0 - 1, T0)).toBe(700n);
    } finally {
      await h.close();
    }
  });
});

/** Rows in many states and hours, written the way 0009's schema allows: born in an initial state, then moved by UPDATE. */
async function fillAt0009(h: Pick<Harness, 'run'>): Promise<void> {
  await seed(h);
  const rng = prng(42);
  const ins = `INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, approval_id, created_at, updated_at)
    VALUES (?, ?, ?, 'eip3009', ?, ?, ?, ?, ?, ?, ?)`;
  for (let i = 0; i < 300; i++) {
    const id = `old_${i}`;
    const agent = rng.pick(AGENTS);
    const at = rng.time();
    const amount = rng.amount();
    const start = rng.pick(['signing', 'pending_approval', 'denied'] as const);
    const approvalId = start === 'pending_approval' ? `apr_old_${i}` : null;
    await h.run(ins, [id, ORG, agent, start, amount, start === 'denied' ? 0 : 1, at, approvalId, at, at]);
    if (approvalId) {
      await h.run(`INSERT INTO approvals (id, org_id, agent_id, transaction_id, status, created_at, expires_at, decided_at, decided_by, note)
        VALUES (?, ?, ?, ?, 'pending', ?, ?, NULL, '', '')`, [approvalId, ORG, agent, id, at, at + H]);
    }
    const to = rng.next();
    if (start === 'signing') {
      if (to < 0.5) await h.run("UPDATE transactions SET status = 'signed' WHERE id = ?", [id]);
      else if (to < 0.7) await h.run("UPDATE transactions SET status = 'failed', holds_cap = 0 WHERE id = ?", [id]);
      else if (to < 0.8) {
        await h.run("UPDATE transactions SET status = 'signed' WHERE id = ?", [id]);
        await h.run("UPDATE transactions SET status = 'reverted', holds_cap = 0 WHERE id = ?", [id]);
      }
    } else if (start === 'pending_approval') {
      if (to < 0.3) await h.run("UPDATE transactions SET status = 'approved', cap_at = ? WHERE id = ?", [rng.time(), id]);
      else if (to < 0.5) await h.run("UPDATE transactions SET status = 'expired', holds_cap = 0 WHERE id = ?", [id]);
      else if (to < 0.7) await h.run("UPDATE transactions SET status = 'signing', cap_at = ? WHERE id = ?", [rng.time(), id]);
    }
  }
}

describe('migration 0010 (cap_buckets)', () => {
  test('behavior: a SQLite database at 0009 with rows in many states and hours gets exact buckets', async () => {
    const file = tempFile();
    const old = new Database(file);
    old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const m of MIGRATIONS.filter((x) => x.version <= 9)) {
      old.exec(m.sqlite);
      old.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
    }
    old.pragma('foreign_keys = ON');
    await fillAt0009(sqliteRaw(old));
    expect(old.prepare("SELECT 1 FROM sqlite_master WHERE name = 'cap_buckets'").get()).toBeUndefined();
    old.close();

    const db = openDatabase(file);
    const h: Harness = { name: 'sqlite', t: { payments: wrap(createPaymentStore(db)), approvals: wrap(createApprovalStore(db)), transactions: wrap(createTransactionStore(db)) },
      ...sqliteRaw(db), oneConnection: (fn) => fn(sqliteRaw(db)), close: async () => void db.close() };
    try {
      expect((await h.rows<{ n: bigint }>('SELECT count(*) AS n FROM cap_buckets'))[0]!.n).toBeGreaterThan(50n);
      await expectBucketsExact(h, 'after migration');
      await expectCommittedExact(h, prng(7), 'after migration');
    } finally {
      await h.close();
    }
  });

  test('behavior: a PostgreSQL database at 0009 with rows in many states and hours gets exact buckets', async () => {
    const d = await createTestDatabase();
    dbs.push(d);
    const c = new pg.Client({ connectionString: d.url, types: TYPES });
    await c.connect();
    try {
      await migratePg(c, MIGRATIONS.filter((m) => m.version <= 9));
      await fillAt0009(pgRaw((text, values) => c.query(text, values)));
      expect((await c.query("SELECT 1 FROM information_schema.tables WHERE table_name = 'cap_buckets'")).rowCount).toBe(0);
    } finally {
      await c.end();
    }
    const h = await (async (): Promise<Harness> => {
      const store = await createPgStore({ connectionString: d.url, poolSize: 2 });
      return { name: 'pg', t: store, ...pgRaw((text, values) => store.pool.query(text, values)), oneConnection: async () => {}, close: () => store.close() };
    })();
    try {
      expect((await h.rows<{ n: bigint }>('SELECT count(*) AS n FROM cap_buckets'))[0]!.n).toBeGreaterThan(50n);
      await expectBucketsExact(h, 'after migration');
      await expectCommittedExact(h, prng(7), 'after migration');
    } finally {
      await h.close();
    }
  });
});

describe('migrate-store (cap_buckets is derived data)', () => {
  /** A SQLite data directory at this build's schema, with the rows fillAt0009 writes (the triggers keep its buckets). */
  async function sourceDir(): Promise<string> {
    const file = tempFile();
    const db = openDatabase(file);
    // The hot line in the middle of the rows' hours, so both of SQLite's bucket tables hold some.
    db.prepare('UPDATE cap_hot_from SET bucket = ?').run(Math.floor(T0 / H));
    await fillAt0009(sqliteRaw(db));
    db.close();
    return dirname(file);
  }

  test('behavior: the buckets are copied once, not added to again by the target triggers, and stay exact afterwards', async () => {
    const dir = await sourceDir();
    const src = openDatabase(join(dir, 'paypolicy.db'));
    const lite: Harness = { name: 'sqlite', t: { payments: wrap(createPaymentStore(src)), approvals: wrap(createApprovalStore(src)), transactions: wrap(createTransactionStore(src)) },
      ...sqliteRaw(src), oneConnection: (fn) => fn(sqliteRaw(src)), close: async () => void src.close() };
    const sourceBuckets = (await lite.rows<{ agent_id: string; bucket: bigint; total: bigint }>(`SELECT agent_id, bucket, total FROM ${CAP_BUCKETS_UNION} ORDER BY agent_id, bucket`))
      .map((b) => [b.agent_id, String(b.bucket), String(b.total)]);
    const [tables] = await lite.rows<{ cold: bigint; hot: bigint }>('SELECT (SELECT count(*) FROM cap_buckets) AS cold, (SELECT count(*) FROM cap_buckets_hot) AS hot');
    expect(tables!.cold).toBeGreaterThan(10n);
    expect(tables!.hot).toBeGreaterThan(10n);
    await lite.close();
    expect(sourceBuckets.length).toBeGreaterThan(50);

    const d = await createTestDatabase();
    dbs.push(d);
    const report = await migrateStore({ fromDir: dir, toUrl: d.url });
    expect(report.tables.find((t) => t.table === 'cap_buckets')!.rows).toBe(sourceBuckets.length);

    const store = await createPgStore({ connectionString: d.url, poolSize: 2 });
    const h: Harness = { name: 'pg', t: store, ...pgRaw((text, values) => store.pool.query(text, values)), oneConnection: async () => {}, close: () => store.close() };
    try {
      const target = (await h.rows<{ agent_id: string; bucket: bigint; total: bigint }>('SELECT agent_id, bucket, total FROM cap_buckets ORDER BY agent_id, bucket'))
        .map((b) => [b.agent_id, String(b.bucket), String(b.total)]);
      expect(target).toEqual(sourceBuckets);
      await expectBucketsExact(h, 'after migrate-store');
      await expectCommittedExact(h, prng(11), 'after migrate-store');
      // The triggers are on again: a new payment and a move of a copied row are followed.
      await h.t.payments.insert(paymentRow(9001, 'agt_a', 'signing', T0 + 2 * H + 5, 12_345n, null));
      await h.t.payments.settleSigned(paymentRow(9001, 'agt_a', 'signing', 0, 0n, null).id, '{}', T0);
      const [held] = await h.rows<{ id: string }>("SELECT id FROM transactions WHERE status = 'signing' LIMIT 1");
      if (held) await h.t.payments.markFailed(held.id, 'x', T0);
      await expectBucketsExact(h, 'after new writes');
      await expectCommittedExact(h, prng(12), 'after new writes');
    } finally {
      await h.close();
    }
  });

  test('behavior: an agent-hour found in both of SQLite\'s bucket tables (a hand edit) is copied once, summed, as the cap sum counts it', async () => {
    const dir = await sourceDir();
    const src = new Database(join(dir, 'paypolicy.db'));
    const hot = src.prepare('SELECT agent_id, bucket, total FROM cap_buckets_hot WHERE total > 10 ORDER BY agent_id, bucket LIMIT 1').safeIntegers(true).get() as
      { agent_id: string; bucket: bigint; total: bigint };
    src.prepare('UPDATE cap_buckets_hot SET total = total - 7 WHERE agent_id = ? AND bucket = ?').run(hot.agent_id, hot.bucket);
    src.prepare('INSERT INTO cap_buckets (agent_id, bucket, total) VALUES (?, ?, 7)').run(hot.agent_id, hot.bucket);
    src.close();
    const d = await createTestDatabase();
    dbs.push(d);
    await migrateStore({ fromDir: dir, toUrl: d.url });
    const c = new pg.Client({ connectionString: d.url });
    await c.connect();
    try {
      const { rows } = await c.query('SELECT total::text AS total FROM cap_buckets WHERE agent_id = $1 AND bucket = $2', [hot.agent_id, hot.bucket.toString()]);
      expect(rows).toEqual([{ total: hot.total.toString() }]);
    } finally {
      await c.end();
    }
  });

  test.each(['cap_buckets', 'cap_buckets_hot'])('error: a source whose buckets disagree with its ledger is refused, and nothing is written (%s)', async (table) => {
    const dir = await sourceDir();
    const src = new Database(join(dir, 'paypolicy.db'));
    expect(src.prepare(`UPDATE ${table} SET total = total + 1 WHERE agent_id = 'agt_b' AND bucket = (SELECT max(bucket) FROM ${table} WHERE agent_id = 'agt_b')`).run().changes).toBe(1);
    src.close();
    const d = await createTestDatabase();
    dbs.push(d);
    await expect(migrateStore({ fromDir: dir, toUrl: d.url })).rejects.toThrow(/verification of cap_buckets failed: 1 agent-hour sums differ .*nothing was written/);
    const c = new pg.Client({ connectionString: d.url });
    await c.connect();
    try {
      for (const table of ['transactions', 'cap_buckets', 'agents']) {
        expect((await c.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n, table).toBe(0);
      }
    } finally {
      await c.end();
    }
  });
});
