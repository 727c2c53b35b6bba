import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { lockDataDir } from '../../../src/store/dataDir.js';
import { openDatabase, type Db } from '../../../src/store/db.js';
import { migratePg } from '../../../src/store/pg/migrate.js';
import { migrateStore } from '../../../src/store/pg/migrateStore.js';
import { TYPES } from '../../../src/store/pg/sql.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

/**
 * migrate-store: a SQLite data directory holding every table, rows in every state (signed,
 * reverted, approved, expired...), amounts above 2^53, BLOBs, NULLs and non-ASCII text, copied into
 * a fresh PostgreSQL database in one transaction and verified; refusals leave the target unchanged.
 */

const BIG = 9_007_199_254_740_993n; // 2^53 + 1: not a double
const T0 = 1_700_000_000_000;

/** Fills a SQLite data directory through its real migrations and triggers (rows move by UPDATE as the app moves them). */
function fill(db: Db, payments: number): void {
  const run = (sql: string, ...v: unknown[]) => db.prepare(sql).run(...v);
  db.transaction(() => {
    run('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)', 'org_a', 'Acme Ünïcode ✓', 3600, T0);
    run('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)', 'org_b', "B's org", 60, T0 + 1);
    run('INSERT INTO treasuries VALUES (?, ?, ?, ?)', 'org_a', '0x' + 'a'.repeat(40), randomBytes(77), T0);
    run('INSERT INTO treasuries VALUES (?, ?, ?, ?)', 'org_b', '0x' + 'b'.repeat(40), randomBytes(77), T0);
    run('INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)', 'key_1', 'org_a', 'live', 'pp_live_ab', randomBytes(32), 'main', T0, null);
    run('INSERT INTO api_keys VALUES (?, ?, ?, ?, ?, ?, ?, ?)', 'key_2', 'org_b', 'test', 'pp_test_cd', randomBytes(32), '', T0, T0 + 5);
    for (const [id, org, status] of [['agt_1', 'org_a', 'active'], ['agt_2', 'org_a', 'paused'], ['agt_3', 'org_b', 'revoked']] as const) {
      run('INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?)', id, org, `agent ${id}`, status, T0, T0 + 1, id === 'agt_1' ? T0 + 9 : null);
      run('INSERT INTO policies (agent_id, allowlist, spend_cap_micros, approval_threshold_micros, updated_at, max_network_fee_wei) VALUES (?, ?, ?, ?, ?, ?)',
        id, JSON.stringify([{ chainId: 8453, address: '0x' + '1'.repeat(40) }]), BIG, 1_000_000, T0, '123456789012345678901');
    }
    run(`INSERT INTO services (id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, created_at, updated_at)
         VALUES ('svc_1', NULL, 'shared', 'Shared', 'd', 'c', '', '', '[]', '[]', ?, ?), ('svc_2', 'org_a', 'mine', 'Mine', 'd', 'c', '', '', '[]', '[]', ?, ?)`, T0, T0, T0, T0);
    const ins = db.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, recipient, amount_micros, holds_cap, cap_at,
      idempotency_key, request_hash, request, result, approval_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 8453, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)`);
    for (let i = 0; i < payments; i++) {
      const id = `tx_${String(i).padStart(6, '0')}`;
      const amount = i === 7 ? BIG : BigInt(1000 + i);
      ins.run(id, 'org_a', 'agt_1', i % 3 === 0 ? 'raw_transaction' : 'eip3009', 'signing', '0x' + '1'.repeat(40), amount, 1, T0 + i,
        i % 2 === 0 ? `idem-${i}` : null, 'h' + i, JSON.stringify({ n: i, s: 'ü' }), null, T0 + i, T0 + i);
      if (i % 5 === 4) {
        run("UPDATE transactions SET status = 'failed', holds_cap = 0 WHERE id = ?", id);
      } else {
        run("UPDATE transactions SET status = 'signed', result = ?, nonce = ? WHERE id = ?", JSON.stringify({ sig: i }), i % 3 === 0 ? i / 3 : null, id);
        if (i % 3 === 0) run("UPDATE transactions SET submit_status = 'confirmed', tx_hash = ?, block_number = ?, confirmations = 3, network_fee_wei = '21000000000000', broadcast_at = ? WHERE id = ?", '0x' + i.toString(16).padStart(64, '0'), 100 + i, T0 + i, id);
      }
    }
    run("UPDATE transactions SET status = 'reverted', holds_cap = 0 WHERE id = 'tx_000003'");
    // Approvals: one approved (then collected: signing → signed), one denied, one expired, one pending.
    for (const [n, final] of [[1, 'approved'], [2, 'denied'], [3, 'expired'], [4, 'pending']] as const) {
      const id = `txa_${n}`;
      run(`INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at, approval_id)
           VALUES (?, 'org_b', 'agt_3', 'eip3009', 'pending_approval', ?, 1, ?, ?, ?, ?)`, id, 5_000_000 + n, T0, T0, T0, `apr_${n}`);
      run('INSERT INTO approvals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', `apr_${n}`, 'org_b', 'agt_3', id, final, T0, T0 + 3600_000,
        final === 'pending' ? null : T0 + 10, final === 'pending' ? '' : 'usr_1', 'note ✓');
      if (final === 'approved') {
        run("UPDATE transactions SET status = 'approved' WHERE id = ?", id);
        run("UPDATE transactions SET status = 'signing' WHERE id = ?", id);
        run("UPDATE transactions SET status = 'signed' WHERE id = ?", id);
      } else if (final !== 'pending') {
        run('UPDATE transactions SET status = ?, holds_cap = 0 WHERE id = ?', final, id);
      }
    }
    run("INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at, reason) VALUES ('txr_1', 'org_a', 'agt_2', 'x402', 'recorded', 0, 0, ?, ?, ?, 'paused')", T0, T0, T0);
    run('INSERT INTO account_nonces VALUES (?, ?, ?)', 'org_a', 8453, Math.ceil(payments / 3) + 2);
    run('INSERT INTO released_nonces VALUES (?, ?, ?)', 'org_a', 8453, Math.ceil(payments / 3));
    run('INSERT INTO released_nonces VALUES (?, ?, ?)', 'org_a', 8453, Math.ceil(payments / 3) + 1);
    // Two attempts in the same millisecond: their order is the rowid's (seq on PostgreSQL).
    run("INSERT INTO chain_attempts VALUES ('tx_000000', '0xfff', 'bump', '0x02', '21000', '3', '1', ?)", T0);
    run("INSERT INTO chain_attempts VALUES ('tx_000000', '0x111', 'filler', '0x02', '21000', '4', '2', ?)", T0);
    run('INSERT INTO settings VALUES (?, ?), (?, ?)', 'bootstrapped_at', String(T0), 'admin_token_hash', 'ab'.repeat(32));
    run('INSERT INTO dashboard_users VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)', 'usr_1', 'org_b', 'owner@example.com', 'owner', randomBytes(16), randomBytes(64), 'scrypt:N=16384', T0, 0);
    run('INSERT INTO dashboard_users VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)', 'usr_2', 'org_b', 'gone@example.com', 'viewer', randomBytes(16), randomBytes(64), 'scrypt:N=16384', T0, 1);
    run('INSERT INTO dashboard_sessions VALUES (?, ?, ?, ?, ?)', randomBytes(32), 'usr_1', 'csrf', T0, T0 + 1000);
    run('INSERT INTO dashboard_sessions VALUES (?, ?, ?, ?, ?)', Buffer.from([0, 1, 255]), 'usr_1', 'csrf2', T0, T0 + 1000);
    run('INSERT INTO dashboard_login_failures VALUES (?, ?, ?, ?)', 'x@example.com', 5, T0, T0 + 900_000);
  })();
}

let pgdb: TestDatabase;
const dirs: string[] = [];
const targets: TestDatabase[] = [];

function newDataDir(payments: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'pp-migrate-'));
  dirs.push(dir);
  const db = openDatabase(join(dir, 'paypolicy.db'));
  fill(db, payments);
  db.close();
  return dir;
}

async function query<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url, types: TYPES });
  await c.connect();
  try {
    return (await c.query<T>(text, values)).rows;
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  pgdb = await createTestDatabase();
});
afterAll(async () => {
  await pgdb?.drop();
  for (const t of targets) await t.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('migrate-store', () => {
  test('copies every table exactly, in one transaction, and verifies counts, sums and rows', async () => {
    const dir = newDataDir(1234);
    const lines: string[] = [];
    const report = await migrateStore({ fromDir: dir, toUrl: pgdb.url, batchRows: 100, log: (l) => lines.push(l) });
    const byTable = Object.fromEntries(report.tables.map((t) => [t.table, t]));
    expect(Object.keys(byTable).sort()).toEqual(['account_nonces', 'agents', 'api_keys', 'approvals', 'cap_buckets', 'chain_attempts', 'dashboard_login_failures',
      'dashboard_sessions', 'dashboard_users', 'limit_states', 'organizations', 'policies', 'policy_versions', 'released_nonces', 'services', 'settings', 'transactions', 'treasuries']);
    expect(byTable.transactions!.rows).toBe(1234 + 5);
    // Every table's rows, read from both sides, are the same values with the same types.
    const src = openDatabase(join(dir, 'paypolicy.db'));
    src.defaultSafeIntegers(true);
    try {
      for (const t of report.tables) {
        const cols = (src.prepare('SELECT name FROM pragma_table_info(?)').all(t.table) as Array<{ name: string }>).map((c) => c.name);
        const order = t.table === 'dashboard_sessions' ? 'token_hash' : t.table === 'chain_attempts' ? 'transaction_id, hash' : t.table === 'cap_buckets' ? 'agent_id, bucket' : cols[0];
        const a = src.prepare(`SELECT ${cols.join(', ')} FROM ${t.table} ORDER BY ${order}`).all();
        const b = await query(pgdb.url, `SELECT ${cols.join(', ')} FROM ${t.table} ORDER BY ${order}`);
        expect(b.length, t.table).toBe(a.length);
        expect(b, t.table).toEqual(a);
        expect(t.rows).toBe(a.length);
      }
      // Sums reported are the source's (the 2^53 + 1 amount kept exact).
      const sum = (src.prepare('SELECT sum(amount_micros) AS s FROM transactions').get() as { s: bigint }).s;
      expect(byTable.transactions!.sums.amount_micros).toBe(sum.toString());
      expect(BigInt(byTable.transactions!.sums.amount_micros!)).toBeGreaterThan(BIG);
    } finally {
      src.close();
    }
    const [big] = await query<{ amount_micros: bigint }>(pgdb.url, "SELECT amount_micros FROM transactions WHERE id = 'tx_000007'");
    expect(big!.amount_micros).toBe(BIG);
    // The same-millisecond attempts keep the source's order (rowid → seq).
    const attempts = await query<{ hash: string }>(pgdb.url, 'SELECT hash FROM chain_attempts ORDER BY created_at, seq');
    expect(attempts.map((a) => a.hash)).toEqual(['0xfff', '0x111']);
    // The state-machine triggers are on again: a row cannot be born signed.
    await expect(query(pgdb.url, `INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
      VALUES ('late', 'org_a', 'agt_1', 'eip3009', 'reverted', 1, 0, 0, 0, 0)`)).rejects.toThrow(/initial state/);
    const [{ n }] = (await query<{ n: bigint }>(pgdb.url, "SELECT count(*)::bigint AS n FROM pg_trigger WHERE NOT tgisinternal AND tgenabled <> 'O'")) as [{ n: bigint }];
    expect(n).toBe(0n);
    expect(lines.some((l) => /copied transactions: 1239 rows/.test(l))).toBe(true);
  });

  test('refuses a target that is not empty, and writes nothing to it', async () => {
    // pgdb holds the previous test's copy.
    const dir = newDataDir(3);
    const before = await query<{ n: bigint }>(pgdb.url, 'SELECT count(*)::bigint AS n FROM transactions');
    await expect(migrateStore({ fromDir: dir, toUrl: pgdb.url })).rejects.toThrow(/not empty \(rows in .*transactions/);
    expect(await query(pgdb.url, 'SELECT count(*)::bigint AS n FROM transactions')).toEqual(before);

    // One settings row (what a replica's first start writes) is enough to refuse.
    const other = await createTestDatabase();
    targets.push(other);
    const c = new pg.Client({ connectionString: other.url });
    await c.connect();
    await migratePg(c);
    await c.query("INSERT INTO settings VALUES ('bootstrapped_at', '1')");
    await c.end();
    await expect(migrateStore({ fromDir: dir, toUrl: other.url })).rejects.toThrow(/not empty/);
  });

  test('refuses while a server holds the data directory, and a source at another schema version', async () => {
    const dir = newDataDir(2);
    const target = await createTestDatabase();
    targets.push(target);
    const lock = lockDataDir(dir);
    try {
      await expect(migrateStore({ fromDir: dir, toUrl: target.url })).rejects.toThrow(/in use by another paypolicy process/);
    } finally {
      lock.release();
    }
    const db = new Database(join(dir, 'paypolicy.db'));
    db.prepare('DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)').run();
    db.close();
    // One migration behind this build, whichever number that is.
    const behind = await migrateStore({ fromDir: dir, toUrl: target.url }).then(() => '', (e: Error) => e.message);
    const [, at, build] = /schema version (\d+), this build at (\d+)/.exec(behind) ?? [];
    expect(Number(build) - Number(at), behind).toBe(1);
    await expect(migrateStore({ fromDir: join(dir, 'nope'), toUrl: target.url })).rejects.toThrow(/does not exist/);
    // Nothing reached the target but (at most) its schema.
    expect(await query(target.url, 'SELECT count(*)::bigint AS n FROM information_schema.tables WHERE table_name = \'transactions\'')).toEqual([{ n: expect.any(BigInt) }]);
  });

  test('an unreachable target is a clear error, and the data directory is released afterwards', async () => {
    const dir = newDataDir(1);
    await expect(migrateStore({ fromDir: dir, toUrl: 'postgres://root@127.0.0.1:1/none' })).rejects.toThrow(/cannot connect to the target PostgreSQL/);
    lockDataDir(dir).release();
  });
});
