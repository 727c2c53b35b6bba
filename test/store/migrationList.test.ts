import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { openDatabase } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { decodePolicyVersion } from '../../src/store/policyVersionJson.js';
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

  test('behavior: policy versions start from each existing policy as version 1, the same on both stores', async () => {
    const before = MIGRATIONS.findIndex((m) => m.name === 'policy_versions');
    const seed = [
      "INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES ('org_v', 'v', 3600, 1)",
      "INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES ('agt_v', 'org_v', 'v', 'active', 1, 1)",
      `INSERT INTO policies (agent_id, allowlist, spend_cap_micros, approval_threshold_micros, max_network_fee_wei, max_per_payment_micros, limits, updated_at)
        VALUES ('agt_v', '["0xaa","weather"]', 9007199254740993, 5, '1000000000000000000000', NULL, '[{"window":"1h","max_usd":"2.5"}]', 77)`,
    ];
    const expected = { allowlist: ['0xaa', 'weather'], spendCapMicros: 9_007_199_254_740_993n, approvalThresholdMicros: 5n, maxNetworkFeeWei: 10n ** 21n,
      maxPerPaymentMicros: null, version: 1, updatedAt: 77 };

    const lite = new Database(':memory:');
    lite.defaultSafeIntegers(true);
    for (const m of MIGRATIONS.slice(0, before)) lite.exec(m.sqlite);
    for (const q of seed) lite.exec(q);
    lite.exec(MIGRATIONS[before]!.sqlite);
    const liteRow = lite.prepare("SELECT version, created_at, actor, policy FROM policy_versions WHERE agent_id = 'agt_v'").get() as { version: bigint; created_at: bigint; actor: string; policy: string };
    lite.close();
    expect([liteRow.version, liteRow.created_at, liteRow.actor]).toEqual([1n, 77n, '']);
    expect(decodePolicyVersion(liteRow.policy, 1, 77)).toMatchObject({ ...expected, limits: [{ window: '1h', maxMicros: 2_500_000n }] });

    const d = await createTestDatabase();
    dbs.push(d);
    const c = new pg.Client({ connectionString: d.url });
    await c.connect();
    try {
      await migratePg(c, MIGRATIONS.slice(0, before));
      for (const q of seed) await c.query(q);
      await migratePg(c);
      const { rows } = await c.query<{ version: string; actor: string; policy: string }>("SELECT version::text, actor, policy FROM policy_versions WHERE agent_id = 'agt_v'");
      expect(rows.map((r) => [r.version, r.actor])).toEqual([['1', '']]);
      expect(decodePolicyVersion(rows[0]!.policy, 1, 77)).toEqual(decodePolicyVersion(liteRow.policy, 1, 77));
      const current = await c.query<{ version: string }>("SELECT version::text FROM policies WHERE agent_id = 'agt_v'");
      expect(current.rows[0]!.version).toBe('1');
    } finally {
      await c.end();
    }
  });
});
