import type { Db } from './db.js';
import type { SpendRepository } from './port.js';
import type { Synchronous } from './syncTables.js';

/**
 * The rows up to the cap horizon from cap_rows (by agent and time), those above it (the last few
 * seconds) from the time index, as payments.committedSince reads them (migration 0011).
 * Bucket k holds cap_at in (since + k·size, since + (k+1)·size], matching the window's open start.
 */
export const SPEND_BUCKETS_SQL = `SELECT (cap_at - @since - 1) / @size AS bucket, SUM(amount_micros) AS total FROM (
    SELECT cap_at, amount_micros FROM cap_rows WHERE agent_id = @agentId AND cap_at > @since
    UNION ALL
    SELECT cap_at, amount_micros FROM transactions
    WHERE holds_cap = 1 AND cap_at > MAX(@since, (SELECT horizon FROM cap_horizon)) AND agent_id = @agentId)
  GROUP BY bucket`;

/**
 * What counts against an agent's cap (holds_cap = 1: signing, signed, approved, pending approval), summed
 * per time bucket. It uses the same column and the same comparison (`cap_at > since`) as the cap
 * check in payments.ts, so the dashboard shows exactly what the policy sees.
 */
export function createSpendStore(db: Db): Synchronous<SpendRepository> {
  const buckets = db.prepare(SPEND_BUCKETS_SQL).safeIntegers(true);
  return {
    /** Micro-USD per bucket of `sizeMs` since `since`; index k of the result is bucket k, `count` buckets. */
    bucketsSince(agentId: string, since: number, sizeMs: number, count: number): bigint[] {
      const out: bigint[] = Array.from({ length: count }, () => 0n);
      // Bound as bigint so SQLite sees INTEGER operands and divides as integers (a JS number binds as REAL).
      const bound = { agentId, since: BigInt(Math.floor(since)), size: BigInt(Math.floor(sizeMs)) };
      for (const r of buckets.all(bound) as { bucket: bigint; total: bigint }[]) {
        const k = Number(r.bucket);
        // A cap_at a little past `now` (clock skew between writers) lands in the last bucket.
        out[Math.min(Math.max(k, 0), count - 1)]! += BigInt(r.total);
      }
      return out;
    },
  };
}
export type SpendStore = ReturnType<typeof createSpendStore>;
