import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import postgres from 'postgres';

/**
 * Which PostgreSQL driver the store uses: `pg` (node-postgres) or `postgres` (postgres.js), each
 * measured on the sign path's transaction shape: lock the agent row, sum its rolling cap, insert
 * the payment (a ~400-byte request and result), COMMIT with synchronous_commit on. 64 clients over
 * 256 agents for BENCH_SECONDS (default 8) per driver, pool BENCH_PG_POOL (default 16), on the
 * database PAYPOLICY_BENCH_PG_URL (default the test server's `test`), in a schema of its own that
 * is dropped afterwards. Prints one line per driver: transactions/s, p50 and p99 of one transaction.
 *
 *   npm run build && node dist/bench/pgDrivers.js     (BENCH_PG_POOL=8 for the smaller pool)
 */

const URL = process.env.PAYPOLICY_BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432/test';
const AGENTS = 256;
const CONCURRENCY = 64;
const POOL = Number(process.env.BENCH_PG_POOL ?? 16);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const SCHEMA = `drvbench_${process.pid}`;
const body = 'x'.repeat(400);

export type DriverResult = { driver: string; txPerSecond: number; p50: number; p99: number; pool: number };

async function run(driver: string, once: (agent: string) => Promise<unknown>): Promise<DriverResult> {
  const lat: number[] = [];
  let n = 0;
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: CONCURRENCY }, async (_, c) => {
    let i = c;
    while (performance.now() < end) {
      const t = performance.now();
      await once(`a${i++ % AGENTS}`);
      lat.push(performance.now() - t);
      n++;
    }
  }));
  lat.sort((a, b) => a - b);
  return { driver, txPerSecond: n / SECONDS, p50: lat[lat.length >> 1] ?? NaN, p99: lat[Math.floor(lat.length * 0.99)] ?? NaN, pool: POOL };
}

export async function benchDrivers(): Promise<DriverResult[]> {
  const admin = new pg.Client(URL);
  await admin.connect();
  const results: DriverResult[] = [];
  try {
    await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA}`);
    await admin.query(`CREATE TABLE ${SCHEMA}.agents (id text primary key, cap bigint not null);
      CREATE TABLE ${SCHEMA}.tx (id text primary key, agent_id text not null, amount bigint not null, holds_cap int not null,
        cap_at bigint not null, request text, result text);
      CREATE INDEX ON ${SCHEMA}.tx (agent_id, holds_cap, cap_at, amount);`);
    await admin.query(`INSERT INTO ${SCHEMA}.agents SELECT 'a' || i, 1000000000000000 FROM generate_series(0, ${AGENTS - 1}) i`);

    const pool = new pg.Pool({ connectionString: URL, max: POOL });
    results.push(await run('pg', async (agent) => {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await c.query({ name: 'lock', text: `SELECT cap FROM ${SCHEMA}.agents WHERE id = $1 FOR UPDATE`, values: [agent] });
        const now = Date.now();
        await c.query({ name: 'sum', text: `SELECT COALESCE(SUM(amount),0) AS s FROM ${SCHEMA}.tx WHERE agent_id = $1 AND holds_cap = 1 AND cap_at > $2`, values: [agent, now - 86_400_000] });
        await c.query({ name: 'ins', text: `INSERT INTO ${SCHEMA}.tx VALUES ($1,$2,$3,1,$4,$5,$5)`, values: [randomUUID(), agent, 10000, now, body] });
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    }));
    await pool.end();

    const sql = postgres(URL, { max: POOL, prepare: true, onnotice: () => {} });
    results.push(await run('postgres', (agent) => sql.begin(async (t) => {
      await t`SELECT cap FROM ${sql(SCHEMA)}.agents WHERE id = ${agent} FOR UPDATE`;
      const now = Date.now();
      await t`SELECT COALESCE(SUM(amount),0) AS s FROM ${sql(SCHEMA)}.tx WHERE agent_id = ${agent} AND holds_cap = 1 AND cap_at > ${now - 86_400_000}`;
      await t`INSERT INTO ${sql(SCHEMA)}.tx VALUES (${randomUUID()}, ${agent}, 10000, 1, ${now}, ${body}, ${body})`;
    })));
    await sql.end();
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
    await admin.end();
  }
  return results;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const r of await benchDrivers()) {
    process.stdout.write(`${r.driver}: ${r.txPerSecond.toFixed(0)} tx/s p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)} ms (pool ${r.pool})\n`);
  }
}
