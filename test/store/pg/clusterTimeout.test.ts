import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openPgBackend } from '../../../src/store/pg/appStore.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

/**
 * A cluster job's own statements (its lock, the `settings` row of its last start) are bounded like
 * the requests' statements. Without a statement timeout, behind a lock nobody releases (an
 * operator's `LOCK TABLE settings`, a stuck session) the approval sweep would hang on every replica
 * for good, and a replica starting up would wait without end for the bootstrap lock. Bounded, the
 * job fails, and runs again once the lock is gone.
 */
let db: TestDatabase;
let backend: Awaited<ReturnType<typeof openPgBackend>>;

beforeAll(async () => {
  db = await createTestDatabase();
  backend = await openPgBackend({ connectionString: db.url, statementTimeoutMs: 500 });
});
afterAll(async () => {
  await backend?.close();
  await db.drop();
});

describe('cluster jobs behind a lock nobody releases', () => {
  test('error: a periodic job fails within the statement timeout instead of hanging, and runs once the lock is gone', async () => {
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE settings IN ACCESS EXCLUSIVE MODE');
    let ran = 0;
    const started = performance.now();
    await expect(backend.cluster.oncePer('sweep-under-lock', 1_000, async () => { ran++; })).rejects.toThrow();
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(ran).toBe(0);
    await holder.query('ROLLBACK');
    await holder.end();
    await backend.cluster.oncePer('sweep-under-lock', 1_000, async () => { ran++; });
    expect(ran).toBe(1);
  }, 20_000);
});
