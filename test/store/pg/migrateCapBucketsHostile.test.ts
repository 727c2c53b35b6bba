import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, expect, test } from 'vitest';
import { openDatabase } from '../../../src/store/db.js';
import { migrateStore } from '../../../src/store/pg/migrateStore.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

/**
 * Hostile inputs against migrate-store's cap_buckets check: SQLite files whose hourly cap sums
 * disagree with their ledger in ways a single "total + 1" does not cover (the bucket moved an hour,
 * moved to another agent, a credit in a future hour, sums that cancel across hours, the table
 * dropped or retyped, the triggers dropped and the ledger edited under them). A wrong bucket is a
 * wrong cap from the first payment on PostgreSQL, so each must be refused with nothing written;
 * harmless differences (a zero bucket) may be copied, exactly.
 */

const T0 = 1_700_000_000_000;
const dirs: string[] = [];
const dbs: TestDatabase[] = [];
afterAll(async () => {
  for (const d of dbs) await d.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function source(hostile: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'pp-capb-hostile-'));
  dirs.push(dir);
  const db = openDatabase(join(dir, 'paypolicy.db'));
  const run = (sql: string, ...v: unknown[]) => db.prepare(sql).run(...v);
  run('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)', 'org_a', 'A', 3600, T0);
  run('INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?)', 'agt_1', 'org_a', 'a', 'active', T0, T0, null);
  run('INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?)', 'agt_2', 'org_a', 'b', 'active', T0, T0, null);
  for (const [id, agent, at] of [['tx_1', 'agt_1', T0], ['tx_2', 'agt_1', T0 + 3_600_000], ['tx_3', 'agt_2', T0]] as const) {
    run(`INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, recipient, amount_micros, holds_cap, cap_at, request_hash, request, created_at, updated_at)
       VALUES (?, 'org_a', ?, 'eip3009', 'signing', 8453, '0x${'1'.repeat(40)}', 1000, 1, ?, 'h', '{}', ?, ?)`, id, agent, at, at, at);
  }
  db.exec(hostile);
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

const H = 3_600_000;
const B0 = Math.floor(T0 / H);
const refused: Array<[string, string]> = [
  ['a bucket moved one hour later', `UPDATE cap_buckets SET bucket = bucket + 1 WHERE agent_id = 'agt_2'`],
  ['a bucket moved to another agent', `UPDATE cap_buckets SET agent_id = 'agt_2' WHERE agent_id = 'agt_1' AND bucket = ${B0 + 1}`],
  ['a credit in a future hour', `INSERT INTO cap_buckets VALUES ('agt_1', ${B0 + 5}, -1000000)`],
  ['sums that cancel across hours', `UPDATE cap_buckets SET total = total - 500 WHERE agent_id = 'agt_1' AND bucket = ${B0};
    UPDATE cap_buckets SET total = total + 500 WHERE agent_id = 'agt_1' AND bucket = ${B0 + 1}`],
  ['buckets of an agent that does not exist', `INSERT INTO cap_buckets VALUES ('agt_ghost', ${B0}, 7)`],
  ['the table emptied', 'DELETE FROM cap_buckets'],
  ['the triggers dropped and the ledger edited under them', `DROP TRIGGER transactions_cap_update;
    UPDATE transactions SET amount_micros = 1 WHERE id = 'tx_1'`],
  ['the triggers dropped and a holding row inserted', `DROP TRIGGER transactions_cap_insert;
    INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, recipient, amount_micros, holds_cap, cap_at, request_hash, request, created_at, updated_at)
       VALUES ('tx_9', 'org_a', 'agt_1', 'eip3009', 'signing', 8453, '0x${'1'.repeat(40)}', 5000000, 1, ${T0}, 'h', '{}', ${T0}, ${T0})`],
  ['the table dropped', 'DROP TABLE cap_buckets'],
];

for (const [name, sql] of refused) {
  test(`migrate-store refuses a source with ${name}, nothing written`, async () => {
    const target = await createTestDatabase();
    dbs.push(target);
    const error = await migrateStore({ fromDir: source(sql), toUrl: target.url }).then(() => undefined, (err: unknown) => err as Error);
    expect(error, 'copied a source whose cap sums are wrong').toBeDefined();
    expect(error!.name, error!.message).toBe('MigrateStoreError');
    expect(await count(target.url)).toBe(0);
  });
}

// Not wrong sums: copied as they are, and the target's cap reads the same numbers.
const copied: Array<[string, string]> = [
  ['a zero bucket', `INSERT INTO cap_buckets VALUES ('agt_2', ${B0 + 3}, 0)`],
  ['the table retyped (not STRICT, same values)', `CREATE TABLE cb2 (agent_id TEXT NOT NULL, bucket INTEGER NOT NULL, total INTEGER NOT NULL, PRIMARY KEY (agent_id, bucket)) WITHOUT ROWID;
    INSERT INTO cb2 SELECT * FROM cap_buckets; PRAGMA legacy_alter_table = ON; DROP TABLE cap_buckets; ALTER TABLE cb2 RENAME TO cap_buckets`],
];

for (const [name, sql] of copied) {
  test(`migrate-store with ${name}: an exact copy or a clear error, never half-written`, async () => {
    const target = await createTestDatabase();
    dbs.push(target);
    const error = await migrateStore({ fromDir: source(sql), toUrl: target.url }).then(() => undefined, (err: unknown) => err as Error);
    if (error) {
      expect(error.name, error.message).toBe('MigrateStoreError');
      expect(await count(target.url)).toBe(0);
      return;
    }
    const c = new pg.Client({ connectionString: target.url });
    await c.connect();
    try {
      const r = await c.query<{ agent_id: string; bucket: string; total: string }>('SELECT agent_id, bucket::text, total::text FROM cap_buckets WHERE total <> 0 ORDER BY agent_id, bucket');
      expect(r.rows).toEqual([
        { agent_id: 'agt_1', bucket: String(B0), total: '1000' },
        { agent_id: 'agt_1', bucket: String(B0 + 1), total: '1000' },
        { agent_id: 'agt_2', bucket: String(B0), total: '1000' },
      ]);
    } finally {
      await c.end();
    }
  });
}
