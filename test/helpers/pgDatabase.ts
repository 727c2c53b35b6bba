import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * The PostgreSQL server the tests run against (../shared/notes/postgres.md: PostgreSQL 15 on
 * 127.0.0.1:5432, trust authentication). PAYPOLICY_TEST_PG_URL overrides it.
 */
export const PG_SERVER_URL = process.env.PAYPOLICY_TEST_PG_URL ?? 'postgres://root@127.0.0.1:5432/test';

export type TestDatabase = {
  /** Connection string of the new database. */
  url: string;
  name: string;
  /** Drops the database, ending any connection still open to it. */
  drop(): Promise<void>;
};

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: PG_SERVER_URL, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (err) {
    // Never a skip: these tests must run wherever the suite runs.
    throw new Error(`PostgreSQL does not answer at ${PG_SERVER_URL} (${(err as Error).message}); the PostgreSQL store tests need it. `
      + 'Start it (../shared/notes/postgres.md) or set PAYPOLICY_TEST_PG_URL', { cause: err });
  }
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * A fresh, empty database `pp_<random>` on the test server, for one test file (CREATE DATABASE
 * cannot run inside a transaction, so each file gets a database rather than a schema).
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `pp_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(PG_SERVER_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {}),
  };
}
