import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { openDatabase } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { migrateStore } from '../../src/store/pg/migrateStore.js';
import { migratePg } from '../../src/store/pg/migrate.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pgDatabase.js';

/**
 * A schema version is checked by name as well as number: an unreleased build once gave SQLite
 * migration 12 to another change (cap_buckets_by_hour, reverted before it landed), and a database
 * it had migrated looked up to date to this build, which then failed on a missing table. Every
 * reader of a schema version refuses such a database, saying why, before touching it.
 */

const dirs: string[] = [];
const dbs: TestDatabase[] = [];
afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const d of dbs) await d.drop();
});
function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-migration-names-'));
  dirs.push(dir);
  return join(dir, 'paypolicy.db');
}

const renamed = MIGRATIONS.find((m) => m.version === 12)!;
const foreign = /schema migration 12 is "cap_buckets_by_hour", but this build's 12 is "cap_buckets_hot": the database was written by another build of paypolicy/;

/** A SQLite file at this build's schema whose migration 12 row names another change. */
function renamedSqlite(): string {
  const file = tempFile();
  openDatabase(file).close();
  const db = new Database(file);
  db.prepare('UPDATE schema_migrations SET name = ? WHERE version = ?').run('cap_buckets_by_hour', renamed.version);
  db.close();
  return file;
}

describe('migrations are matched by name', () => {
  test('error: SQLite refuses a database whose migration of the same number is another one', () => {
    expect(renamed).toMatchObject({ version: 12, name: 'cap_buckets_hot' });
    const file = renamedSqlite();
    expect(() => openDatabase(file)).toThrow(foreign);
    // Refused before anything was written: the row still names the other build's migration.
    const db = new Database(file, { readonly: true });
    expect(db.prepare('SELECT name FROM schema_migrations WHERE version = 12').pluck().get()).toBe('cap_buckets_by_hour');
    db.close();
  });

  test('error: migrate-store refuses such a source, and PostgreSQL refuses such a target', async () => {
    const file = renamedSqlite();
    const d = await createTestDatabase();
    dbs.push(d);
    await expect(migrateStore({ fromDir: dirname(file), toUrl: d.url })).rejects.toThrow(foreign);
    const c = new pg.Client({ connectionString: d.url });
    await c.connect();
    try {
      await migratePg(c);
      await c.query('UPDATE schema_migrations SET name = $1 WHERE version = 12', ['cap_buckets_by_hour']);
      await expect(migratePg(c)).rejects.toThrow(foreign);
    } finally {
      await c.end();
    }
  });
});
