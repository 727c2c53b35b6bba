import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import { openDatabase, type Db } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { CAP_SUM_LISTED_HOURS, CAP_SUM_SQL, CAP_SUM_WIDE_SQL, createPaymentStore } from '../../src/store/payments.js';

/**
 * Migration 0012: cap_buckets keyed (bucket, agent_id), so one commit's bucket updates for many
 * agents share the current hour's few pages, and the cap sum reads an agent's hours by point
 * lookups. The random sequences against the brute force (capBuckets.test.ts) run on this layout
 * too; here the migration of a ledger at 0011, the page count that is the reason for the layout,
 * the query plans, and the sum at the edge between the listed and the wide statement.
 */

const H = 3_600_000;
const ORG = 'org_hours';
const AGENT_COUNT = 64;
const AGENTS = Array.from({ length: AGENT_COUNT }, (_, i) => `agt_${String(i).padStart(24, '0')}`);

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-capbuckets-hour-'));
  dirs.push(dir);
  return join(dir, 'paypolicy.db');
}

function seed(db: Database.Database, at: number): void {
  db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)').run(ORG, 'Hours', 3600, at);
  const agent = db.prepare('INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
  for (const id of AGENTS) agent.run(id, ORG, id, 'active', at, at);
}

/**
 * `days` of history: one row per agent and hour ending an hour before `now`, amounts varied, one
 * row in seven denied (holds nothing). One INSERT, as the bench's history phase builds its rows.
 */
function history(db: Database.Database, now: number, days: number): void {
  db.prepare(`WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
    INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
    SELECT printf('tx_h_%08d_%03d', n.i, a.k), ?, a.id, 'eip3009', CASE WHEN (n.i + a.k) % 7 = 0 THEN 'denied' ELSE 'signed' END,
      1000 + (n.i * 31 + a.k * 7) % 997, CASE WHEN (n.i + a.k) % 7 = 0 THEN 0 ELSE 1 END,
      ? - H - n.i * ? / 3 - a.k, ? - H - n.i * ? / 3 - a.k, ? - H - n.i * ? / 3 - a.k
    FROM n, (SELECT id, CAST(substr(id, 5) AS INTEGER) AS k FROM agents) a`.replaceAll(' H ', ` ${H} `))
    .run(days * 24 * 3 - 1, ORG, now, H, now, H, now, H);
}

/** A database file with migrations up to 0011 only, as the previous build left it. */
function databaseAt0011(file: string): Database.Database {
  const db = new Database(file);
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
  for (const m of MIGRATIONS.filter((x) => x.version <= 11)) {
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
  }
  return db;
}

const bucketsOf = (db: Database.Database | Db) =>
  db.prepare('SELECT agent_id, bucket, total FROM cap_buckets ORDER BY agent_id, bucket').raw(true).safeIntegers(true).all() as Array<[string, bigint, bigint]>;

/** The sum the cap check must see, from the rows themselves. */
function bruteForce(db: Database.Database | Db, agentId: string, since: number): bigint {
  return db.prepare('SELECT COALESCE(SUM(amount_micros), 0) FROM transactions WHERE agent_id = ? AND holds_cap = 1 AND cap_at > ?')
    .pluck().safeIntegers(true).get(agentId, since) as bigint;
}

function insertSigned(db: Database.Database | Db, id: string, agentId: string, at: number, amount: number): void {
  db.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
    VALUES (?, ?, ?, 'eip3009', 'signed', ?, 1, ?, ?, ?)`).run(id, ORG, agentId, amount, at, at, at);
}

/** WAL frames one transaction of `fn` writes, from an empty WAL (checkpointed and truncated first). */
function framesOf(db: Db, file: string, fn: () => void): number {
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.transaction(fn)();
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  return Math.round(statSync(`${file}-wal`).size / (pageSize + 24));
}

describe('migration 0012 (cap_buckets keyed hour first)', () => {
  test('behavior: a ledger at 0011 keeps every bucket, its triggers, and exact sums', () => {
    const file = tempFile();
    const old = databaseAt0011(file);
    const now = Date.now();
    seed(old, now - 40 * 24 * H);
    history(old, now, 3);
    insertSigned(old, 'tx_future', AGENTS[1]!, now + 30 * 24 * H, 4242);
    const before = bucketsOf(old);
    expect(before.length).toBeGreaterThan(AGENT_COUNT * 70);
    old.close();

    const db = openDatabase(file);
    try {
      expect(bucketsOf(db)).toEqual(before);
      const pk = db.prepare("SELECT name FROM pragma_table_info('cap_buckets') WHERE pk > 0 ORDER BY pk").pluck().all();
      expect(pk).toEqual(['bucket', 'agent_id']);
      // The triggers are back: an insert, a move in time and a delete each keep the buckets exact.
      insertSigned(db, 'tx_new', AGENTS[2]!, now - 5 * H, 777);
      db.prepare('UPDATE transactions SET cap_at = cap_at - 2 * ? WHERE id = ?').run(H, 'tx_h_00000003_003');
      db.prepare("DELETE FROM transactions WHERE id = 'tx_h_00000004_004'").run();
      const derived = db.prepare(`SELECT agent_id, (cap_at - ((cap_at % ${H}) + ${H}) % ${H}) / ${H} AS bucket, SUM(amount_micros)
        FROM transactions WHERE holds_cap = 1 GROUP BY 1, 2 ORDER BY 1, 2`).raw(true).safeIntegers(true).all();
      expect(bucketsOf(db).filter((r) => r[2] !== 0n)).toEqual(derived);
      const payments = createPaymentStore(db);
      for (const agentId of [AGENTS[0]!, AGENTS[1]!, AGENTS[2]!, AGENTS[3]!, AGENTS[4]!]) {
        for (const since of [now - 24 * H, now - 24 * H - 1, now - 5 * H - 1, now - 80 * H, now - 400 * H, now + 29 * 24 * H]) {
          expect(payments.committedSince(agentId, since, now), `${agentId} since ${since}`).toBe(bruteForce(db, agentId, since));
        }
      }
    } finally {
      db.close();
    }
  });

  test('behavior: with a week of history, one commit of payments for many agents writes the current hour\'s few bucket pages', () => {
    const file = tempFile();
    const db = openDatabase(file);
    try {
      const now = Date.now();
      seed(db as unknown as Database.Database, now - 40 * 24 * H);
      history(db as unknown as Database.Database, now, 7);
      let n = 0;
      const payAll = () => {
        for (const agentId of AGENTS) insertSigned(db, `tx_now_${n++}`, agentId, now, 10);
      };
      // Each agent's current hour exists already: the commit only updates bucket rows.
      payAll();
      const withBuckets = framesOf(db, file, payAll);
      db.exec('DROP TRIGGER transactions_cap_insert');
      const withoutBuckets = framesOf(db, file, payAll);
      // Keyed (agent_id, bucket), each agent's current row is on its own page among its 168
      // hours: 70 more frames here, one per agent and some. Keyed hour first, 8: the pages of the
      // current hour and the path to them.
      expect(withBuckets - withoutBuckets).toBeLessThanOrEqual(16);
    } finally {
      db.close();
    }
  });

  test('behavior: the cap sum reads an agent\'s hours by primary-key lookups; a window too long to list reads their range', () => {
    const db = openDatabase(tempFile());
    try {
      const plan = (sql: string) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all({ agentId: 'a', lo: 1n, hi: 25n, since: 1, end: 2, now: 3 }) as Array<{ detail: string }>)
        .map((r) => r.detail).join('\n');
      const listed = plan(CAP_SUM_SQL);
      expect(listed).toMatch(/SEARCH b USING PRIMARY KEY \(bucket=\? AND agent_id=\?\)/);
      expect(listed).toMatch(/SEARCH cap_buckets USING PRIMARY KEY \(bucket>\?\)/);
      expect(listed).not.toMatch(/SCAN (cap_buckets|b\b|transactions|cap_rows)/);
      const wide = plan(CAP_SUM_WIDE_SQL);
      expect(wide).toMatch(/SEARCH cap_buckets USING PRIMARY KEY \(bucket>\? AND bucket<\?\)/);
      expect(wide).not.toMatch(/SCAN (cap_buckets|transactions|cap_rows)/);
    } finally {
      db.close();
    }
  });

  test('behavior: the sum is exact on both sides of the listed span, for future rows and for now before since', () => {
    const db = openDatabase(tempFile());
    try {
      const now = Math.floor(Date.now() / H) * H + 1234;
      seed(db as unknown as Database.Database, now - 60 * 24 * H);
      history(db as unknown as Database.Database, now, 5);
      insertSigned(db, 'tx_future_1', AGENTS[0]!, now + 3 * H, 50_001);
      insertSigned(db, 'tx_future_2', AGENTS[0]!, now + 900 * H, 60_002);
      insertSigned(db, 'tx_now_0', AGENTS[0]!, now, 70_003);
      const payments = createPaymentStore(db);
      const spans = [0, 1, 23, 24, 25, CAP_SUM_LISTED_HOURS - 1, CAP_SUM_LISTED_HOURS, CAP_SUM_LISTED_HOURS + 1, 119, 500];
      for (const agentId of [AGENTS[0]!, AGENTS[7]!]) {
        for (const hours of spans) {
          for (const offset of [-1, 0, 1, 1234, H - 1]) {
            const since = now - hours * H - offset;
            expect(payments.committedSince(agentId, since, now), `${agentId} ${hours} h ${offset}`).toBe(bruteForce(db, agentId, since));
          }
        }
        // now before since (a clock that went back): what is after since still counts.
        for (const since of [now + 2 * H, now + 899 * H, now + 901 * H]) {
          expect(payments.committedSince(agentId, since, now), `${agentId} since ${since} after now`).toBe(bruteForce(db, agentId, since));
        }
      }
      expect(payments.committedSince(AGENTS[0]!, now - 24 * H, now)).toBeGreaterThan(50_001n + 60_002n + 70_003n);
    } finally {
      db.close();
    }
  });
});
