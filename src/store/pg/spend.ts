import { statement, type Sql } from './sql.js';
import type { SpendRepository } from '../port.js';

// Bucket k holds cap_at in (since + k·size, since + (k+1)·size]; BIGINT division truncates toward
// zero like SQLite's integer division, and the sum is cast back from NUMERIC.
const BUCKETS = statement('spend.buckets', `SELECT (cap_at - $2::bigint - 1) / $3::bigint AS bucket, SUM(amount_micros)::bigint AS total
  FROM transactions WHERE agent_id = $1 AND holds_cap = 1 AND cap_at > $2::bigint GROUP BY bucket`);

/** What counts against an agent's cap, per time bucket (PostgreSQL twin of ../spend.ts). */
export function createPgSpendStore(sql: Sql): SpendRepository {
  return {
    async bucketsSince(agentId, since, sizeMs, count) {
      const out: bigint[] = Array.from({ length: count }, () => 0n);
      const rows = await sql.rows<{ bucket: bigint; total: bigint }>(BUCKETS, [agentId, BigInt(Math.floor(since)), BigInt(Math.floor(sizeMs))]);
      for (const r of rows) {
        const k = Number(r.bucket);
        // A cap_at a little past `now` (clock skew between writers) lands in the last bucket.
        out[Math.min(Math.max(k, 0), count - 1)]! += BigInt(r.total);
      }
      return out;
    },
  };
}
