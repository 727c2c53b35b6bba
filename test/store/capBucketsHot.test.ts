import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import { createCapRowsMover } from '../../src/store/capRows.js';
import { openDatabase, type Db } from '../../src/store/db.js';
import { CAP_BUCKETS_UNION } from '../../src/store/migrations/0012_cap_buckets_hot.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { CAP_SUM_SQL, createPaymentStore } from '../../src/store/payments.js';
import { openStore } from '../../src/store/store.js';
import { sqliteBuckets } from '../helpers/capBuckets.js';

/**
 * Migration 0012 and the mover's fold: the buckets of the current hours live in cap_buckets_hot,
 * a table of a few pages, so a commit of payments for many agents writes those pages and not one
 * page of cap_buckets per agent. The random sequences against the brute force, with the line
 * moving through the rows' hours, are in capBuckets.test.ts; here the migration of a ledger at
 * 0011, the page count that is the reason for the split, the store's fold, and the query plan.
 */

const H = 3_600_000;
const ORG = 'org_hot';
const AGENT_COUNT = 64;
const AGENTS = Array.from({ length: AGENT_COUNT }, (_, i) => `agt_${String(i).padStart(24, '0')}`);

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-capbuckets-hot-'));
  dirs.push(dir);
  return join(dir, 'paypolicy.db');
}

type Sql = Database.Database | Db;

function seed(db: Sql, at: number): void {
  db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)').run(ORG, 'Hot', 3600, at);
  const agent = db.prepare('INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
  for (const id of AGENTS) agent.run(id, ORG, id, 'active', at, at);
}

/**
 * `hours` of history ending at `end`: three rows per agent and hour, amounts varied, one row in
 * seven denied (holds nothing). One INSERT, as the bench's history phase builds its rows.
 */
function history(db: Sql, end: number, hours: number): void {
  db.prepare(`WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
    INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
    SELECT printf('tx_h_%08d_%03d', n.i, a.k), ?, a.id, 'eip3009', CASE WHEN (n.i + a.k) % 7 = 0 THEN 'denied' ELSE 'signed' END,
      1000 + (n.i * 31 + a.k * 7) % 997, CASE WHEN (n.i + a.k) % 7 = 0 THEN 0 ELSE 1 END,
      @end - n.i * ${H / 3} - a.k, @end - n.i * ${H / 3} - a.k, @end - n.i * ${H / 3} - a.k
    FROM n, (SELECT id, CAST(substr(id, 5) AS INTEGER) AS k FROM agents) a`.replace('?, a.id', '@org, a.id').replace('i < ?', 'i < @last'))
    .run({ last: hours * 3 - 1, org: ORG, end });
}

function insertSigned(db: Sql, id: string, agentId: string, at: number, amount: number): void {
  db.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
    VALUES (?, ?, ?, 'eip3009', 'signed', ?, 1, ?, ?, ?)`).run(id, ORG, agentId, amount, at, at, at);
}

/** A database file with migrations up to 0011 only, as the previous build left it. */
function databaseAt0011(file: string): Database.Database {
  const db = new Database(file);
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
  for (const m of MIGRATIONS.filter((x) => x.version <= 11)) {
    db.exec(m.sqlite);
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
  }
  return db;
}

/** The buckets the rows imply, zero totals aside, in sqliteBuckets' order. */
function derivedBuckets(db: Sql) {
  return db.prepare(`SELECT agent_id, (cap_at - ((cap_at % ${H}) + ${H}) % ${H}) / ${H} AS bucket, SUM(amount_micros) AS total
    FROM transactions WHERE holds_cap = 1 GROUP BY 1, 2 HAVING SUM(amount_micros) != 0 ORDER BY 1, 2`).safeIntegers(true).all();
}

/** The sum the cap check must see, from the rows themselves. */
function bruteForce(db: Sql, agentId: string, since: number): bigint {
  return db.prepare('SELECT COALESCE(SUM(amount_micros), 0) FROM transactions WHERE agent_id = ? AND holds_cap = 1 AND cap_at > ?')
    .pluck().safeIntegers(true).get(agentId, since) as bigint;
}

const hotFrom = (db: Sql) => db.prepare('SELECT bucket FROM cap_hot_from').pluck().get() as number;

/** WAL frames one transaction of `fn` writes, from an empty WAL (checkpointed and truncated first). */
function framesOf(db: Db, file: string, fn: () => void): number {
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.transaction(fn)();
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  return Math.round(statSync(`${file}-wal`).size / (pageSize + 24));
}

describe('migration 0012 (cap_buckets_hot)', () => {
  test('behavior: a ledger at 0011 keeps every bucket, the current hours move to the hot table, and sums stay exact', () => {
    const file = tempFile();
    const old = databaseAt0011(file);
    const now = Date.now();
    seed(old, now - 40 * 24 * H);
    history(old, now, 72);
    insertSigned(old, 'tx_future', AGENTS[1]!, now + 30 * 24 * H, 4242);
    const before = old.prepare('SELECT agent_id, bucket, total FROM cap_buckets ORDER BY agent_id, bucket').safeIntegers(true).all();
    old.close();

    const db = openDatabase(file);
    try {
      const line = hotFrom(db);
      expect(line).toBe(Math.floor(Date.now() / H) - 1);
      expect(sqliteBuckets(db)).toEqual(before);
      // The current and previous hour of every agent, and the future row, are hot; the rest is not.
      expect(db.prepare('SELECT count(*) FROM cap_buckets_hot').pluck().get()).toBeGreaterThanOrEqual(AGENT_COUNT + 1);
      expect(db.prepare('SELECT max(bucket) FROM cap_buckets').pluck().get()).toBeLessThan(line);
      // The replaced triggers route every change: an insert on each side, a move across the line, a delete.
      insertSigned(db, 'tx_new_hot', AGENTS[2]!, now, 777);
      insertSigned(db, 'tx_new_cold', AGENTS[2]!, now - 5 * H, 778);
      db.prepare('UPDATE transactions SET cap_at = ? WHERE id = ?').run(now - 3 * H, 'tx_h_00000000_003');
      db.prepare('UPDATE transactions SET cap_at = ? WHERE id = ?').run(now, 'tx_h_00000030_004');
      db.prepare("UPDATE transactions SET status = 'reverted', holds_cap = 0 WHERE id = 'tx_h_00000001_005'").run();
      db.prepare("DELETE FROM transactions WHERE id = 'tx_h_00000040_006'").run();
      expect(sqliteBuckets(db, 'total != 0')).toEqual(derivedBuckets(db));
      const payments = createPaymentStore(db);
      for (const agentId of AGENTS.slice(0, 8)) {
        for (const since of [now - 24 * H, now - 24 * H - 1, now - 2 * H - 1, now - H, now - 80 * H, now + 29 * 24 * H]) {
          expect(payments.committedSince(agentId, since, now), `${agentId} since ${since}`).toBe(bruteForce(db, agentId, since));
        }
      }
    } finally {
      db.close();
    }
  });

  test('behavior: with a week of history, a commit of payments for 64 agents writes the hot table\'s few pages, not one page of cap_buckets per agent', () => {
    const file = tempFile();
    const db = openDatabase(file);
    try {
      const now = Date.now();
      seed(db, now - 40 * 24 * H);
      history(db, now - 2 * H, 7 * 24);
      let n = 0;
      const payAll = () => {
        for (const agentId of AGENTS) insertSigned(db, `tx_now_${n++}`, agentId, now, 10);
      };
      // Each agent's current hour exists already: the commits below only update bucket rows.
      payAll();
      const hot = framesOf(db, file, payAll);
      // The same commit with the line above now: the payments' hours are in cap_buckets, among
      // each agent's 168 other hours, as every bucket was before 0012.
      db.prepare('INSERT INTO cap_buckets (agent_id, bucket, total) SELECT agent_id, bucket, total FROM cap_buckets_hot').run();
      db.prepare('DELETE FROM cap_buckets_hot').run();
      db.prepare('UPDATE cap_hot_from SET bucket = ?').run(Math.floor(now / H) + 1);
      expect(sqliteBuckets(db, 'total != 0')).toEqual(derivedBuckets(db));
      const cold = framesOf(db, file, payAll);
      db.exec('DROP TRIGGER transactions_cap_insert');
      const none = framesOf(db, file, payAll);
      // Measured: 3 frames of hot buckets against 61 of cap_buckets (beyond the 18 of the rest).
      expect(hot - none).toBeLessThanOrEqual(16);
      expect(cold - none).toBeGreaterThanOrEqual(AGENT_COUNT / 2);
    } finally {
      db.close();
    }
  });

  test('behavior: the cap sum reads both bucket tables by a range of their primary key', () => {
    const db = openDatabase(tempFile());
    try {
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${CAP_SUM_SQL}`).all(Array.from(CAP_SUM_SQL.matchAll(/\?/g), () => 1)) as Array<{ detail: string }>)
        .map((r) => r.detail).join('\n');
      expect(plan).toMatch(/SEARCH cap_buckets USING PRIMARY KEY \(agent_id=\? AND bucket>\?\)/);
      expect(plan).toMatch(/SEARCH cap_buckets_hot USING PRIMARY KEY \(agent_id=\? AND bucket>\?\)/);
      expect(plan).not.toMatch(/SCAN (cap_buckets|cap_buckets_hot|transactions|cap_rows)\b/);
      expect(CAP_BUCKETS_UNION).toMatch(/cap_buckets_hot/);
    } finally {
      db.close();
    }
  });
});

describe('the store\'s fold of the hot buckets', () => {
  test('behavior: after a clock jumped a year ahead and came back, the line comes back with it, and the sums stay exact', () => {
    const db = openDatabase(tempFile());
    try {
      const now = Date.now();
      seed(db, now - 40 * 24 * H);
      history(db, now, 30);
      const mover = createCapRowsMover(db);
      const payments = createPaymentStore(db);
      const exact = (label: string) => {
        expect(sqliteBuckets(db, 'total != 0'), label).toEqual(derivedBuckets(db));
        for (const agentId of AGENTS.slice(0, 4)) {
          expect(payments.committedSince(agentId, now - 24 * H, now), `${label} ${agentId}`).toBe(bruteForce(db, agentId, now - 24 * H));
        }
      };
      const year = 365 * 24 * H;
      db.transaction(() => mover.fold(now + year))();
      expect(hotFrom(db)).toBe(Math.floor((now + year) / H) - 1);
      expect(db.prepare('SELECT count(*) FROM cap_buckets_hot').pluck().get()).toBe(0);
      // Payments while the line is ahead land in cap_buckets.
      insertSigned(db, 'tx_during', AGENTS[0]!, now, 91);
      exact('line a year ahead');
      expect(mover.foldDue(now)).toBe(true);
      const moved = db.transaction(() => mover.fold(now))();
      expect(moved).toBeGreaterThanOrEqual(AGENT_COUNT);
      expect(hotFrom(db)).toBe(Math.floor(now / H) - 1);
      expect(mover.foldDue(now)).toBe(false);
      exact('line back');
      insertSigned(db, 'tx_after', AGENTS[0]!, now, 92);
      expect(db.prepare('SELECT total FROM cap_buckets_hot WHERE agent_id = ? AND bucket = ?').safeIntegers(true).pluck().get(AGENTS[0], BigInt(Math.floor(now / H))))
        .toBeGreaterThanOrEqual(183n);
      exact('after');
    } finally {
      db.close();
    }
  });

  test('behavior: raises the line to the previous hour, moving older hot buckets into cap_buckets, with exact sums throughout', async () => {
    const file = tempFile();
    // A line six hours back, as a server stopped for that long left it.
    const setup = openDatabase(file);
    const now = Date.now();
    const line = Math.floor(now / H) - 6;
    seed(setup, now - 40 * 24 * H);
    setup.prepare('UPDATE cap_hot_from SET bucket = ?').run(line);
    history(setup, now, 8);
    expect(setup.prepare('SELECT count(DISTINCT bucket) FROM cap_buckets_hot').pluck().get()).toBeGreaterThanOrEqual(6);
    setup.close();

    const store = openStore(file, { capRows: { lagMs: 50, everyMs: 20 } });
    try {
      const payments = store.payments;
      const check = () => {
        for (const agentId of AGENTS.slice(0, 6)) {
          expect(payments.committedSince(agentId, now - 24 * H, now)).toBe(bruteForce(store.db, agentId, now - 24 * H));
          expect(payments.committedSince(agentId, now - 3 * H - 17, now)).toBe(bruteForce(store.db, agentId, now - 3 * H - 17));
        }
      };
      check();
      const target = Math.floor(Date.now() / H) - 1;
      const deadline = Date.now() + 10_000;
      while (hotFrom(store.db) < target && Date.now() < deadline) {
        check();
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(hotFrom(store.db)).toBe(target);
      expect(store.db.prepare('SELECT min(bucket) FROM cap_buckets_hot').pluck().get()).toBeGreaterThanOrEqual(target);
      expect(sqliteBuckets(store.db, 'total != 0')).toEqual(derivedBuckets(store.db));
      check();
      // A payment now lands in the hot table.
      await store.writes.run(() => insertSigned(store.db, 'tx_after_fold', AGENTS[0]!, Date.now(), 5));
      expect(store.db.prepare('SELECT count(*) FROM cap_buckets_hot WHERE agent_id = ? AND bucket = ?').pluck().get(AGENTS[0], Math.floor(Date.now() / H))).toBe(1);
      check();
    } finally {
      await store.close();
    }
  });
});
