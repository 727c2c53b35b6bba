import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openDatabase } from '../../../src/store/db.js';
import { MIGRATIONS } from '../../../src/store/migrations/index.js';
import { PG_ONLY_INDEXES, SQLITE_ONLY_INDEXES } from '../../../src/store/migrations/0011_cap_rows.js';
import { SQLITE_ONLY_TABLES } from '../../../src/store/migrations/0012_cap_buckets_hot.js';
import { PG_ONLY_TABLES } from '../../../src/store/migrations/0013_registry_scopes.js';
import { migratePg } from '../../../src/store/pg/migrate.js';
import { createPgStore } from '../../../src/store/pg/store.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

const dbs: TestDatabase[] = [];
afterAll(async () => {
  for (const d of dbs) await d.drop();
});
async function freshDb(): Promise<TestDatabase> {
  const d = await createTestDatabase();
  dbs.push(d);
  return d;
}
async function query<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const c = new pg.Client(url);
  await c.connect();
  try {
    return (await c.query<R>(text, values)).rows;
  } finally {
    await c.end();
  }
}

describe('migratePg', () => {
  test('behavior: a fresh database gets every migration once, in order, each recorded; a second start applies nothing', async () => {
    const d = await freshDb();
    const store = await createPgStore({ connectionString: d.url, poolSize: 2 });
    await store.close();
    const rows = await query<{ version: bigint; name: string }>(d.url, 'SELECT version::int AS version, name FROM schema_migrations ORDER BY version');
    expect(rows.map((r) => [r.version, r.name])).toEqual(MIGRATIONS.map((m) => [m.version, m.name]));
    const again = new pg.Client(d.url);
    await again.connect();
    try {
      expect(await migratePg(again)).toEqual({ applied: [] });
    } finally {
      await again.end();
    }
  });

  test('behavior: three replicas starting at once migrate the database once (the advisory lock)', async () => {
    const d = await freshDb();
    const clients = [0, 1, 2].map(() => new pg.Client(d.url));
    await Promise.all(clients.map((c) => c.connect()));
    try {
      const results = await Promise.all(clients.map((c) => migratePg(c)));
      const applied = results.map((r) => r.applied).sort((a, b) => b.length - a.length);
      expect(applied).toEqual([MIGRATIONS.map((m) => m.version), [], []]);
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
    const rows = await query<{ n: number }>(d.url, 'SELECT count(*)::int AS n FROM schema_migrations');
    expect(rows[0]!.n).toBe(MIGRATIONS.length);
    // Stores starting together on a migrated database all come up.
    const stores = await Promise.all([0, 1, 2].map(() => createPgStore({ connectionString: d.url, poolSize: 1 })));
    await Promise.all(stores.map((s) => s.close()));
  });

  test('error: a database whose schema is newer than this build is refused', async () => {
    const d = await freshDb();
    await (await createPgStore({ connectionString: d.url, poolSize: 1 })).close();
    await query(d.url, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'future', 0)");
    await expect(createPgStore({ connectionString: d.url, poolSize: 1 })).rejects.toThrow(new RegExp(`schema version 99 is newer than this build knows \\(${MIGRATIONS.length}\\)`));
  });

  test('error: a migration that fails leaves nothing of itself and is named', async () => {
    const d = await freshDb();
    const c = new pg.Client(d.url);
    await c.connect();
    try {
      const broken = [...MIGRATIONS.slice(0, 2), { version: 3, name: 'broken', sqlite: '', postgres: 'CREATE TABLE half (x INT); SELECT 1/0;' }];
      await expect(migratePg(c, broken)).rejects.toThrow(/migration 3 \(broken\) failed: division by zero/);
      const tables = await c.query(`SELECT 1 FROM information_schema.tables WHERE table_name = 'half'`);
      expect(tables.rowCount).toBe(0);
      const versions = await c.query('SELECT version FROM schema_migrations ORDER BY version');
      expect(versions.rows.map((r) => Number(r.version))).toEqual([1, 2]);
    } finally {
      await c.end();
    }
  });
});

describe('schema parity with SQLite', () => {
  let dir: string;
  let pgUrl: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'paypolicy-pg-parity-'));
    pgUrl = (await freshDb()).url;
    await (await createPgStore({ connectionString: pgUrl, poolSize: 1 })).close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('behavior: the same tables with the same columns, nullability and indexes (chain_attempts.seq stands in for rowid)', async () => {
    const lite = openDatabase(join(dir, 'db.sqlite'));
    try {
      // SQLite's cap_rows and its horizon (migration 0011) are its own index of the cap rows; its hot
      // buckets and their line (0012) hold the current hours of cap_buckets. PostgreSQL's registry
      // versions (0013) tell replicas of each other's registry changes; SQLite has one writer.
      const liteTables = (lite.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`).all() as { name: string }[])
        .map((r) => r.name).filter((name) => !SQLITE_ONLY_TABLES.includes(name));
      expect(SQLITE_ONLY_TABLES.every((name) => lite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name))).toBe(true);
      const pgTables = (await query<{ table_name: string }>(pgUrl,
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`)).map((r) => r.table_name);
      expect(pgTables.filter((name) => !PG_ONLY_TABLES.includes(name))).toEqual(liteTables);
      expect(PG_ONLY_TABLES.every((name) => pgTables.includes(name))).toBe(true);
      for (const table of liteTables) {
        const liteCols = (lite.prepare(`SELECT name, "notnull" AS nn, pk FROM pragma_table_info(?) ORDER BY name`).all(table) as { name: string; nn: number; pk: number }[])
          .map((c) => [c.name, c.nn === 1 || c.pk > 0]);
        const pgCols = (await query<{ column_name: string; is_nullable: string }>(pgUrl,
          `SELECT column_name, is_nullable FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY column_name`, [table]))
          .filter((c) => !(table === 'chain_attempts' && c.column_name === 'seq'))
          .map((c) => [c.column_name, c.is_nullable === 'NO']);
        expect(pgCols, table).toEqual(liteCols);
      }
      const liteIndexes = (lite.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name`).all() as { name: string; sql: string }[]);
      const pgIndexes = await query<{ indexname: string; indexdef: string }>(pgUrl,
        `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key' ORDER BY indexname`);
      // The cap rows' index is the one that differs (migration 0011): each store has its own.
      expect(pgIndexes.map((i) => i.indexname).filter((n) => !PG_ONLY_INDEXES.includes(n)))
        .toEqual(liteIndexes.map((i) => i.name).filter((n) => !SQLITE_ONLY_INDEXES.includes(n)));
      for (const name of PG_ONLY_INDEXES) expect(pgIndexes.map((i) => i.indexname)).toContain(name);
      for (const name of SQLITE_ONLY_INDEXES) expect(liteIndexes.map((i) => i.name)).toContain(name);
      // Partial indexes keep their predicates.
      for (const name of ['transactions_idempotency', 'transactions_unsubmitted', 'transactions_in_flight', 'transactions_raw_nonce', 'services_shared_slug', 'services_private_slug']) {
        expect(pgIndexes.find((i) => i.indexname === name)!.indexdef, name).toMatch(/ WHERE /);
      }
    } finally {
      lite.close();
    }
  });

  test('behavior: the same CHECK constraints refuse the same values', async () => {
    const c = new pg.Client(pgUrl);
    await c.connect();
    try {
      await c.query("INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES ('org_c', 'o', 1, 1)");
      await c.query("INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES ('agt_c', 'org_c', 'a', 'active', 1, 1)");
      const policy = (fee: string) => c.query(`INSERT INTO policies (agent_id, allowlist, spend_cap_micros, approval_threshold_micros, updated_at, max_network_fee_wei)
        VALUES ('agt_c', '[]', 1, 1, 1, $1) ON CONFLICT (agent_id) DO UPDATE SET max_network_fee_wei = excluded.max_network_fee_wei`, [fee]);
      for (const bad of ['', '12a', '-1', '1'.repeat(23), '1.5']) await expect(policy(bad), bad).rejects.toThrow(/check constraint/);
      await policy('1'.repeat(22));
      await expect(c.query("UPDATE agents SET status = 'deleted'")).rejects.toThrow(/check constraint/);
      await expect(c.query("INSERT INTO api_keys (id, org_id, mode, prefix, key_hash, created_at) VALUES ('k', 'org_c', 'prod', 'p', '\\x01', 1)"))
        .rejects.toThrow(/check constraint/);
      await expect(c.query("UPDATE policies SET spend_cap_micros = -1")).rejects.toThrow(/check constraint/);
      // STRICT typing: a fraction is not an INTEGER on either store.
      await expect(c.query("UPDATE policies SET spend_cap_micros = $1", [1.5])).rejects.toThrow(/invalid input syntax for type bigint/);
    } finally {
      await c.end();
    }
  });
});
