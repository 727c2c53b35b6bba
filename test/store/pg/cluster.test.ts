import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createClusterJobs, repairStaleSigning } from '../../../src/store/pg/cluster.js';
import { createConflictSync } from '../../../src/store/pg/conflicts.js';
import { migratePg } from '../../../src/store/pg/migrate.js';
import { TYPES } from '../../../src/store/pg/sql.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

/**
 * Cluster-once work on PostgreSQL: three pools stand for three replicas on one database.
 */

let db: TestDatabase;
let pools: pg.Pool[];

beforeAll(async () => {
  db = await createTestDatabase();
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await migratePg(c);
  await c.end();
  pools = [0, 1, 2].map(() => {
    const pool = new pg.Pool({ connectionString: db.url, max: 4, types: TYPES });
    // An idle client the server ends (a terminated backend) is an 'error' event on its pool; the
    // replicas' pools listen for it, and without a listener it is an uncaught exception that fails
    // the whole run (CI saw two, 'terminating connection due to administrator command').
    pool.on('error', () => {});
    return pool;
  });
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await db.drop();
});

describe('cluster jobs', () => {
  test('once: a job runs on one replica at a time; the others skip while it runs', async () => {
    let running = 0;
    let most = 0;
    let runs = 0;
    const job = async () => {
      runs++;
      most = Math.max(most, ++running);
      await sleep(200);
      running--;
      return 'done';
    };
    const results = await Promise.all(pools.flatMap((p) => [0, 1].map(() => createClusterJobs(p).once('sweep', job))));
    expect(runs).toBe(1);
    expect(most).toBe(1);
    expect(results.filter((r) => r === 'done')).toHaveLength(1);
    // Once it ended, the next call (on any replica) runs it again.
    expect(await createClusterJobs(pools[2]!).once('sweep', job)).toBe('done');
    // Another job's lock is independent.
    const other = await Promise.all([createClusterJobs(pools[0]!).once('sweep', job), createClusterJobs(pools[1]!).once('other', async () => 'other')]);
    expect(other).toEqual(['done', 'other']);
  });

  test('oncePer: three replicas with the same period start the job once per period', async () => {
    let runs = 0;
    const jobs = pools.map((p) => createClusterJobs(p));
    for (let round = 0; round < 5; round++) {
      await Promise.all(jobs.map((j) => j.oncePer('expiry', 60_000, async () => {
        runs++;
      })));
    }
    expect(runs).toBe(1);
    // A short period lets the next run through once it has passed.
    let short = 0;
    await jobs[0]!.oncePer('fast', 100, async () => void short++);
    await jobs[1]!.oncePer('fast', 100, async () => void short++);
    expect(short).toBe(1);
    await sleep(120);
    await jobs[2]!.oncePer('fast', 100, async () => void short++);
    expect(short).toBe(2);
  });

  test('a replica that dies holding a job lock does not block the job: the session ends and the lock with it', async () => {
    const held = new pg.Client({ connectionString: db.url });
    await held.connect();
    held.on('error', () => {});
    await held.query("SELECT pg_advisory_lock(hashtextextended('job:submit', 0))");
    const jobs = createClusterJobs(pools[0]!);
    expect(await jobs.once('submit', async () => 'ran')).toBeUndefined();
    const pid = (await held.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    await pools[1]!.query('SELECT pg_terminate_backend($1)', [pid]);
    await held.end().catch(() => {});
    let ran: string | undefined;
    for (let i = 0; i < 50 && ran === undefined; i++) {
      ran = await jobs.once('submit', async () => 'ran');
      if (ran === undefined) await sleep(20);
    }
    expect(ran).toBe('ran');
  });

  test('exclusive: callers wait their turn and every one runs (first-start bootstrap)', async () => {
    const order: string[] = [];
    await Promise.all(pools.map((p, i) => createClusterJobs(p).exclusive('bootstrap', async () => {
      order.push(`in${i}`);
      await sleep(50);
      order.push(`out${i}`);
    })));
    expect(order).toHaveLength(6);
    for (let k = 0; k < 6; k += 2) expect(order[k]!.slice(2)).toBe(order[k + 1]!.slice(3));
  });
});

describe('repairStaleSigning', () => {
  test('only rows in signing older than the cutoff are repaired, once, whichever replicas run it', async () => {
    const T = 1_000_000;
    const q = (text: string, values: unknown[] = []) => pools[0]!.query(text, values);
    await q(`INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES ('org', 'o', 3600, 0)`);
    await q(`INSERT INTO agents VALUES ('agt', 'org', 'a', 'active', 0, 0, NULL)`);
    const insert = (id: string, at: number, status = 'signing', approval: string | null = null) => q(
      `INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, amount_micros, holds_cap, cap_at, created_at, updated_at, approval_id)
       VALUES ($1, 'org', 'agt', 'raw_transaction', $2, 8453, 10, 1, $3, $3, $3, $4)`, [id, status, at, approval]);
    await insert('old', T - 120_000);
    await q(`UPDATE transactions SET nonce = 7 WHERE id = 'old'`);
    await insert('fresh', T - 1_000);
    await q(`UPDATE transactions SET nonce = 8 WHERE id = 'fresh'`);
    await insert('old-approved', T - 120_000, 'pending_approval', 'apr');
    await q(`INSERT INTO approvals VALUES ('apr', 'org', 'agt', 'old-approved', 'approved', 0, 99999999, $1, 'op', '')`, [T - 200_000]);
    await q(`UPDATE transactions SET status = 'signing' WHERE id = 'old-approved'`);
    await q(`UPDATE transactions SET nonce = 9, updated_at = $1 WHERE id = 'old-approved'`, [T - 120_000]);

    const results = await Promise.all(pools.map((p) => repairStaleSigning(p, T - 60_000, T)));
    expect(results.reduce((s, r) => s + r.failed, 0)).toBe(1);
    expect(results.reduce((s, r) => s + r.reapproved, 0)).toBe(1);
    const rows = (await q('SELECT id, status, holds_cap, nonce, reason, cap_at FROM transactions ORDER BY id')).rows;
    expect(rows).toEqual([
      { id: 'fresh', status: 'signing', holds_cap: 1n, nonce: 8n, reason: '', cap_at: BigInt(T - 1_000) },
      { id: 'old', status: 'failed', holds_cap: 0n, nonce: 7n, reason: 'Interrupted while signing', cap_at: BigInt(T - 120_000) },
      { id: 'old-approved', status: 'approved', holds_cap: 1n, nonce: null, reason: '', cap_at: BigInt(T - 200_000) },
    ]);
    // Both stale nonces handed back exactly once; the live row's nonce stays its own.
    expect((await q('SELECT nonce FROM released_nonces ORDER BY nonce')).rows).toEqual([{ nonce: 7n }, { nonce: 9n }]);
  });
});

describe('chain conflicts shared by the replicas', () => {
  test('a conflict one replica saw reaches the others at the next sync; a restart clears it on all', async () => {
    const maps = pools.map(() => new Map<string, string>());
    const changes: Array<[number, string, string | undefined]> = [];
    const syncs = pools.map((p, i) => createConflictSync(p, maps[i]!, (pair, reason) => changes.push([i, pair, reason])));
    const pair = 'org_a\u000084532'; // app/submission/submit.ts pairKey: NUL-separated, stored base64url
    maps[0]!.set(pair, 'nonce 3 used by a transaction paypolicy did not sign');
    await syncs[0]!.sync();
    await Promise.all(syncs.slice(1).map((x) => x.sync()));
    for (const m of maps) expect(m.get(pair)).toBe('nonce 3 used by a transaction paypolicy did not sign');
    expect(changes.map(([i]) => i).sort()).toEqual([1, 2]);
    // A replica restarts (the operator stopped the other signer): every replica drops it.
    await syncs[2]!.clear();
    await Promise.all(syncs.map((x) => x.sync()));
    for (const m of maps) expect(m.has(pair)).toBe(false);
    // A new conflict after the clear is shared again.
    maps[1]!.set(pair, 'again');
    await syncs[1]!.sync();
    await syncs[0]!.sync();
    expect(maps[0]!.get(pair)).toBe('again');
  });
});
