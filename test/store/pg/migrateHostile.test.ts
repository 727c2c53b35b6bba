import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, expect, test } from 'vitest';
import { openDatabase } from '../../../src/store/db.js';
import { migrateStore } from '../../../src/store/pg/migrateStore.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

/**
 * Hostile SQLite content given to migrate-store (values SQLite's
 * type affinity let through that PostgreSQL's columns cannot hold, bad JSON): a clear
 * MigrateStoreError or an exact copy, and never a half-written target.
 */

const T0 = 1_700_000_000_000;
const dirs: string[] = [];
const dbs: TestDatabase[] = [];
afterAll(async () => {
  for (const d of dbs) await d.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function source(hostile: string, ...values: unknown[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'pp-hostile-'));
  dirs.push(dir);
  const db = openDatabase(join(dir, 'paypolicy.db'));
  const run = (sql: string, ...v: unknown[]) => db.prepare(sql).run(...v);
  run('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)', 'org_a', 'A', 3600, T0);
  run('INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?)', 'agt_1', 'org_a', 'a', 'active', T0, T0, null);
  run(`INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, recipient, amount_micros, holds_cap, cap_at, request_hash, request, created_at, updated_at)
       VALUES ('tx_1', 'org_a', 'agt_1', 'eip3009', 'signing', 8453, '0x${'1'.repeat(40)}', 1000, 1, ?, 'h', '{}', ?, ?)`, T0, T0, T0);
  run(hostile, ...values);
  db.close();
  return dir;
}

async function count(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const tables = (await c.query<{ t: string }>(`SELECT table_name AS t FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> 'schema_migrations'`)).rows;
    let n = 0;
    for (const { t } of tables) n += Number((await c.query(`SELECT count(*) AS n FROM "${t}"`)).rows[0].n);
    return n;
  } finally {
    await c.end();
  }
}

// SQLite's tables are STRICT: a REAL, TEXT or BLOB cannot even be stored in another type's column.
const cases: Array<[string, string, unknown[]]> = [
  ['the largest integer', "UPDATE transactions SET amount_micros = 9223372036854775807 WHERE id = 'tx_1'", []],
  ['bad JSON in request and result', "UPDATE transactions SET request = '{not json', status = 'signed', result = '[' WHERE id = 'tx_1'", []],
  // Stored by builds that let a NUL through free text; PostgreSQL's TEXT cannot hold it.
  ['a NUL in text', "UPDATE organizations SET name = 'a' || char(0) || 'b'", []],
];

for (const [name, sql, values] of cases) {
  test(`migrate-store with ${name}: an exact copy or a clear error, never half-written`, async () => {
    const target = await createTestDatabase();
    dbs.push(target);
    let error: unknown;
    try {
      await migrateStore({ fromDir: source(sql, ...values), toUrl: target.url });
    } catch (err) {
      error = err;
    }
    const rows = await count(target.url);
    if (error) {
      expect(rows).toBe(0);
      expect((error as Error).name, (error as Error).message).toBe('MigrateStoreError');
      expect((error as Error).message).toMatch(/organizations.*nothing was written/);
    } else {
      // The organization, the agent and the payment, and the payment's cap bucket (migration 0010).
      expect(rows).toBe(4);
    }
  });
}
