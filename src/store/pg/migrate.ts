import type pg from 'pg';
import { MIGRATIONS } from '../migrations/index.js';
import { assertSameMigrations } from '../migrationNames.js';

/**
 * Key of the session advisory lock that serializes schema migrations across processes ("payp"
 * then 1): replicas starting together queue on it, the first applies what is missing and the
 * others then find nothing left to do.
 */
export const MIGRATION_LOCK_KEY = 0x7061797000000001n;

export type MigrateResult = { applied: number[] };

/**
 * Applies pending migrations forward, in version order (the `postgres` side of the one list both
 * stores read), each in its own transaction with its schema_migrations row, while holding the migration advisory lock on this connection. Refuses a
 * database whose schema is newer than this build knows.
 */
export async function migratePg(client: pg.ClientBase, migrations = MIGRATIONS): Promise<MigrateResult> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`);
    const { rows } = await client.query<{ version: bigint | string; name: string }>('SELECT version, name FROM schema_migrations');
    const done = new Set(rows.map((r) => Number(r.version)));
    const known = Math.max(0, ...migrations.map((m) => m.version));
    const newest = Math.max(0, ...done);
    if (newest > known) {
      throw new Error(`database schema version ${newest} is newer than this build knows (${known}); upgrade paypolicy`);
    }
    assertSameMigrations(rows.map((r) => ({ version: Number(r.version), name: r.name })), migrations);
    const applied: number[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      await client.query('BEGIN');
      try {
        await client.query(m.postgres);
        await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw new Error(`migration ${m.version} (${m.name}) failed: ${(err as Error).message}`, { cause: err });
      }
      applied.push(m.version);
    }
    return { applied };
  } finally {
    // A broken connection releases the lock with its session; otherwise release it now.
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {});
  }
}
