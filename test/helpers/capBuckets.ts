import { expect } from 'vitest';
import { CAP_BUCKETS_UNION } from '../../src/store/migrations/0012_cap_buckets_hot.js';

type Statement = { all(...params: unknown[]): unknown[]; safeIntegers(on?: boolean): Statement };
type Queryable = { prepare(sql: string): Statement };

/**
 * Every agent-hour bucket of a SQLite store (migration 0012: cap_buckets below the hot line,
 * cap_buckets_hot from it on), after checking that split: each agent-hour in one table only, on
 * its side of the line. `where` filters the union (its `?` take `params`).
 */
export function sqliteBuckets(db: Queryable, where = 'TRUE', ...params: unknown[]): Array<{ agent_id: string; bucket: bigint; total: bigint }> {
  const misplaced = db.prepare(`SELECT
      (SELECT count(*) FROM cap_buckets WHERE bucket >= (SELECT bucket FROM cap_hot_from))
    + (SELECT count(*) FROM cap_buckets_hot WHERE bucket < (SELECT bucket FROM cap_hot_from))
    + (SELECT count(*) FROM cap_buckets c JOIN cap_buckets_hot h USING (agent_id, bucket)) AS n`).safeIntegers(true).all() as Array<{ n: bigint }>;
  expect(Number(misplaced[0]!.n), 'hot and cold buckets split at the line, disjoint').toBe(0);
  return db.prepare(`SELECT agent_id, bucket, total FROM ${CAP_BUCKETS_UNION} WHERE ${where} ORDER BY agent_id, bucket`).safeIntegers(true).all(...params) as
    Array<{ agent_id: string; bucket: bigint; total: bigint }>;
}
