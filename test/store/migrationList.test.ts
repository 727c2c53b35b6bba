import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { openDatabase } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { migratePg } from '../../src/store/pg/migrate.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pgDatabase.js';

/**
 * Both stores apply one list of migrations, each change in both dialects. A database records the
 * version and name of every change it holds, and a build refuses a database whose name for a
 * version differs from its own: renaming or renumbering a landed migration would lock every
 * existing database out. The names below are what existing databases hold.
 */
const RECORDED = [
  [1, 'init'], [2, 'dashboard'], [3, 'private_services'], [4, 'network_fee'], [5, 'nonce_reuse'], [6, 'transaction_states'],
  [7, 'submission'], [8, 'chain_tracking'], [9, 'treasury_funds'], [10, 'cap_buckets'], [11, 'cap_rows'], [12, 'cap_buckets_hot'],
  [13, 'registry_scopes'], [14, 'registry_endpoint_counts'],
];

const dirs: string[] = [];
const dbs: TestDatabase[] = [];
afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const d of dbs) await d.drop();
});

describe('MIGRATIONS', () => {
  test('behavior: versions 1..n in order, names unique, every change in both dialects', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    expect(new Set(MIGRATIONS.map((m) => m.name)).size).toBe(MIGRATIONS.length);
    for (const m of MIGRATIONS) {
      expect(m.sqlite.trim(), `${m.version} sqlite`).not.toBe('');
      expect(m.postgres.trim(), `${m.version} postgres`).not.toBe('');
    }
  });

  test('behavior: the names existing databases recorded are the list\'s, unchanged, with later changes only appended', () => {
    expect(MIGRATIONS.slice(0, RECORDED.length).map((m) => [m.version, m.name])).toEqual(RECORDED);
  });

  test('behavior: a SQLite file and a PostgreSQL database migrated by the list record exactly its versions and names', async () => {
    const list = MIGRATIONS.map((m) => [m.version, m.name]);

    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-migration-list-'));
    dirs.push(dir);
    const file = join(dir, 'paypolicy.db');
    openDatabase(file).close();
    const lite = new Database(file, { readonly: true });
    const liteRows = lite.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all() as Array<{ version: number; name: string }>;
    lite.close();
    expect(liteRows.map((r) => [r.version, r.name])).toEqual(list);

    const d = await createTestDatabase();
    dbs.push(d);
    const c = new pg.Client({ connectionString: d.url });
    await c.connect();
    try {
      await migratePg(c);
      const { rows } = await c.query<{ version: number; name: string }>('SELECT version::int AS version, name FROM schema_migrations ORDER BY version');
      expect(rows.map((r) => [r.version, r.name])).toEqual(list);
    } finally {
      await c.end();
    }
  });
});
