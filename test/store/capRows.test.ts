import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import { CAP_ROWS_PER_MOVE } from '../../src/store/capRows.js';
import { openDatabase } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { CAP_SUM_SQL, createPaymentStore } from '../../src/store/payments.js';
import type { PaymentRow } from '../../src/store/port.js';
import { createSpendStore, SPEND_BUCKETS_SQL } from '../../src/store/spend.js';
import { openStore } from '../../src/store/store.js';

/**
 * Migration 0011 and the store's mover: the cap sum's rows of the partial hour are copied into
 * cap_rows behind a horizon instead of being indexed per agent on every payment. The random
 * sequences against the brute force are in capBuckets.test.ts; here the migration of an existing
 * ledger, the query plans that make the sums cheap, and the mover as the store runs it.
 */

const H = 3_600_000;
const ORG = 'org_rows';
const AGENTS = ['agt_1', 'agt_2', 'agt_3', 'agt_4'];

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-caprows-'));
  dirs.push(dir);
  return join(dir, 'paypolicy.db');
}

function seed(db: Database.Database, at: number): void {
  db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)').run(ORG, 'Rows', 3600, at);
  for (const id of AGENTS) {
    db.prepare('INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)').run(id, ORG, id, 'active', at, at);
  }
}

function row(n: number, agentId: string, at: number, amount: bigint, status: 'signed' | 'denied' = 'signed'): PaymentRow & { status: 'signed' | 'denied' } {
  return {
    id: `tx_${String(n).padStart(6, '0')}`, orgId: ORG, agentId, type: 'eip3009', status, chainId: 8453, recipient: '0x' + '33'.repeat(20),
    amountMicros: amount, reason: '', serviceSlug: '', resourceUrl: '', idempotencyKey: null, requestHash: `h${n}`, request: '{}', result: '{}',
    approvalId: null, createdAt: at,
  };
}

/** A database file with migrations up to 0010 only, as an older build left it. */
function databaseAt0010(file: string): Database.Database {
  const db = new Database(file);
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
  for (const m of MIGRATIONS.filter((x) => x.version <= 10)) {
    db.exec(m.sqlite);
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
  }
  return db;
}

/** A row written at schema 0010 (the payment store's statements need 0011's tables). */
function insertAt0010(db: Database.Database, r: ReturnType<typeof row>): void {
  db.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(r.id, r.orgId, r.agentId, r.type, r.status, r.amountMicros, r.status === 'signed' ? 1 : 0, r.createdAt, r.createdAt, r.createdAt);
}

/** The sum the cap check must see, from the rows themselves. */
function bruteForce(db: Database.Database, agentId: string, since: number): bigint {
  return db.prepare('SELECT COALESCE(SUM(amount_micros), 0) FROM transactions WHERE agent_id = ? AND holds_cap = 1 AND cap_at > ?')
    .pluck().safeIntegers(true).get(agentId, since) as bigint;
}

describe('migration 0011 (cap_rows)', () => {
  test('behavior: a ledger at 0010 gets every holding row up to the newest cap_at copied, and exact sums', () => {
    const file = tempFile();
    const old = databaseAt0010(file);
    const t0 = Date.now() - 30 * H;
    seed(old, t0);
    for (let i = 0; i < 400; i++) {
      insertAt0010(old, row(i, AGENTS[i % AGENTS.length]!, t0 + i * 250_000, BigInt(1000 + i), i % 7 === 0 ? 'denied' : 'signed'));
    }
    const newest = t0 + 399 * 250_000;
    old.close();

    const db = openDatabase(file);
    try {
      expect(db.prepare('SELECT horizon FROM cap_horizon').pluck().get()).toBe(newest);
      expect(db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'transactions_cap'").get()).toBeUndefined();
      const held = db.prepare('SELECT count(*) FROM transactions WHERE holds_cap = 1').pluck().get() as number;
      expect(held).toBeGreaterThan(300);
      expect(db.prepare('SELECT count(*) FROM cap_rows').pluck().get()).toBe(held);
      const fresh = createPaymentStore(db);
      for (const agentId of AGENTS) {
        for (const since of [t0 - 1, t0 + 24 * H + 17, t0 + 3 * H, newest - 1, newest, newest + H]) {
          expect(fresh.committedSince(agentId, since, since + 24 * H), `${agentId} ${since}`).toBe(bruteForce(db, agentId, since));
        }
      }
    } finally {
      db.close();
    }
  });

  test('behavior: a row dated in the future does not raise the starting horizon past now', () => {
    const file = tempFile();
    const old = databaseAt0010(file);
    const now = Date.now();
    seed(old, now);
    insertAt0010(old, row(1, 'agt_1', now - H, 5n));
    insertAt0010(old, row(2, 'agt_1', now + 400 * 24 * H, 7n));
    old.close();
    const db = openDatabase(file);
    try {
      const horizon = db.prepare('SELECT horizon FROM cap_horizon').pluck().get() as number;
      expect(horizon).toBeGreaterThanOrEqual(now - 1_000); // SQLite's clock, in whole seconds
      expect(horizon).toBeLessThan(now + 60_000);
      expect(db.prepare('SELECT id FROM cap_rows').pluck().all()).toEqual(['tx_000001']);
      // The future row is found above the horizon.
      expect(createPaymentStore(db).committedSince('agt_1', now - 2 * H, now)).toBe(12n);
    } finally {
      db.close();
    }
  });

  test('behavior: the cap sum and the spend sums read cap_rows and the time index, never a scan of the ledger', () => {
    const db = openDatabase(tempFile());
    try {
      const plan = (sql: string, params: unknown) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as Array<{ detail: string }>)
        .map((r) => r.detail).join('\n');
      const capSum = plan(CAP_SUM_SQL, Array.from(CAP_SUM_SQL.matchAll(/\?/g), () => 1));
      expect(capSum).toMatch(/SEARCH cap_rows USING PRIMARY KEY \(agent_id=\? AND cap_at>\? AND cap_at<\?\)/);
      expect(capSum).toMatch(/SEARCH transactions USING INDEX transactions_cap_time \(cap_at>\? AND cap_at<\?\)/);
      const spend = plan(SPEND_BUCKETS_SQL, { agentId: 'a', since: 1, size: 1 });
      expect(spend).toMatch(/SEARCH cap_rows USING PRIMARY KEY \(agent_id=\? AND cap_at>\?\)/);
      expect(spend).toMatch(/SEARCH transactions USING INDEX transactions_cap_time \(cap_at>\?\)/);
      for (const p of [capSum, spend]) expect(p).not.toMatch(/SCAN (transactions|cap_rows)/);
    } finally {
      db.close();
    }
  });
});

describe('the store\'s cap-rows mover', () => {
  test('behavior: copies rows once they are older than the lag, catches up in bounded moves, and the sums stay exact throughout', async () => {
    const file = tempFile();
    const store = openStore(file, { capRows: { lagMs: 50, everyMs: 20 } });
    try {
      const now = Date.now();
      seed(store.db, now - H);
      // More than one move's worth, so the catch-up path (a full move runs the next at once) is taken.
      const rows = CAP_ROWS_PER_MOVE * 2 + 321;
      await store.writes.run(() => {
        for (let i = 0; i < rows; i++) store.payments.insert(row(i, AGENTS[i % AGENTS.length]!, now - 1_000 + (i % 500), BigInt(i + 1)));
      });
      const spend = createSpendStore(store.db);
      const check = () => {
        for (const agentId of AGENTS) {
          expect(store.payments.committedSince(agentId, now - 1_000 + 123, now)).toBe(bruteForce(store.db, agentId, now - 1_000 + 123));
          expect(spend.bucketsSince(agentId, now - 2_000, 100, 30).reduce((a, b) => a + b, 0n)).toBe(bruteForce(store.db, agentId, now - 2_000));
        }
      };
      check();
      const copied = () => store.db.prepare('SELECT count(*) FROM cap_rows').pluck().get() as number;
      const deadline = Date.now() + 10_000;
      while (copied() < rows && Date.now() < deadline) {
        check();
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(copied()).toBe(rows);
      expect(store.db.prepare('SELECT horizon FROM cap_horizon').pluck().get()).toBeGreaterThanOrEqual(now - 1_000 + 499);
      check();
    } finally {
      await store.close();
    }
  });

  test('behavior: with nothing to copy the mover writes nothing, so an idle store never syncs its WAL', async () => {
    const store = openStore(tempFile(), { capRows: { lagMs: 0, everyMs: 10 } });
    try {
      let syncs = 0;
      store.onWalSync(() => syncs++);
      const now = Date.now();
      seed(store.db, now - H);
      await store.writes.run(() => store.payments.insert(row(1, 'agt_1', now - 100, 5n)));
      // The one row is copied by one move; then ticks every 10 ms find nothing and write nothing.
      const deadline = Date.now() + 5_000;
      while ((store.db.prepare('SELECT count(*) FROM cap_rows').pluck().get() as number) < 1 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise((r) => setTimeout(r, 50));
      const settled = syncs;
      await new Promise((r) => setTimeout(r, 300));
      expect(syncs).toBe(settled);
      expect(store.payments.committedSince('agt_1', now - H, now)).toBe(5n);
    } finally {
      await store.close();
    }
  });

  test('behavior: `capRows: false` never moves, and the sums are exact from the time index alone', async () => {
    const store = openStore(tempFile(), { capRows: false });
    try {
      const now = Date.now();
      seed(store.db, now - H);
      const before = store.db.prepare('SELECT horizon FROM cap_horizon').pluck().get() as number;
      await store.writes.run(() => {
        for (let i = 0; i < 50; i++) store.payments.insert(row(i, 'agt_2', now - 500 + i, 10n));
      });
      await new Promise((r) => setTimeout(r, 700));
      expect(store.db.prepare('SELECT horizon FROM cap_horizon').pluck().get()).toBe(before);
      expect(store.db.prepare('SELECT count(*) FROM cap_rows').pluck().get()).toBe(0);
      expect(store.payments.committedSince('agt_2', now - 24 * H, now)).toBe(500n);
    } finally {
      await store.close();
    }
  });
});
