import type { Db } from './db.js';
import { CAP_BUCKET_MS } from './migrations/0010_cap_buckets.js';

/** How far behind the clock the horizon is kept: rows this young are read from the time index. */
export const CAP_ROWS_LAG_MS = 2_000;
/** How often the mover looks for rows to copy. */
export const CAP_ROWS_EVERY_MS = 500;
/** Rows copied per move at most, so one move holds the writer for a few milliseconds only. */
export const CAP_ROWS_PER_MOVE = 2_000;

/**
 * The mover of migrations 0011 and 0012: raises cap_horizon.horizon and copies the holding rows it
 * passes into cap_rows, so the cap sum finds them by agent; once an hour, folds the hot buckets of
 * the hours before the previous one into cap_buckets (and back, should the clock go back). Run inside a write transaction (the writer
 * connection's): the triggers keep both exact for every other change, and each move is
 * all-or-nothing with its line.
 */
export function createCapRowsMover(db: Db) {
  const horizon = db.prepare('SELECT horizon FROM cap_horizon').pluck();
  // The cap_at of the `limit`-th holding row above the horizon: a move stops there (with every row
  // of that same cap_at), so its size is bounded however far behind it is.
  const nth = db.prepare(`SELECT cap_at FROM transactions WHERE holds_cap = 1 AND cap_at > ? AND cap_at <= ?
    ORDER BY cap_at LIMIT 1 OFFSET ?`).pluck();
  const copy = db.prepare(`INSERT INTO cap_rows (agent_id, cap_at, id, amount_micros)
    SELECT agent_id, cap_at, id, amount_micros FROM transactions WHERE holds_cap = 1 AND cap_at > ? AND cap_at <= ? ORDER BY agent_id, cap_at`);
  const raise = db.prepare('UPDATE cap_horizon SET horizon = ?');
  const hotFrom = db.prepare('SELECT bucket FROM cap_hot_from').pluck();
  // Sorted by agent: each of cap_buckets' pages is written once per fold.
  const foldIn = db.prepare(`INSERT INTO cap_buckets (agent_id, bucket, total)
    SELECT agent_id, bucket, total FROM cap_buckets_hot WHERE bucket < ? ORDER BY agent_id, bucket
    ON CONFLICT (agent_id, bucket) DO UPDATE SET total = total + excluded.total`);
  const foldOut = db.prepare('DELETE FROM cap_buckets_hot WHERE bucket < ?');
  // The way back, for a clock that went back: the hours from the new line up to the old one.
  const unfoldIn = db.prepare(`INSERT INTO cap_buckets_hot (agent_id, bucket, total)
    SELECT agent_id, bucket, total FROM cap_buckets WHERE bucket >= ? AND bucket < ? ORDER BY agent_id, bucket
    ON CONFLICT (agent_id, bucket) DO UPDATE SET total = total + excluded.total`);
  const unfoldOut = db.prepare('DELETE FROM cap_buckets WHERE bucket >= ? AND bucket < ?');
  const moveLine = db.prepare('UPDATE cap_hot_from SET bucket = ?');
  /** The hour the hot buckets should start at for a clock reading: the one before it. */
  const hotTarget = (now: number) => Math.floor(now / CAP_BUCKET_MS) - 1;
  return {
    /** Whether a move towards `target` would copy anything (a cheap index probe; an idle ledger writes nothing). */
    due(target: number): boolean {
      const from = horizon.get() as number;
      return target > from && nth.get(from, target, 0) !== undefined;
    },
    /**
     * Moves the horizon up towards `target` (epoch ms), by at most about `limit` rows; never down.
     * Returns the rows copied; `limit` or more means there may be more to move right away.
     */
    advance(target: number, limit: number = CAP_ROWS_PER_MOVE): number {
      const from = horizon.get() as number;
      if (!(target > from)) return 0;
      const to = Math.min(target, (nth.get(from, target, limit - 1) as number | undefined) ?? target);
      const moved = copy.run(from, to).changes;
      raise.run(to);
      return moved;
    },
    /** Whether the hot buckets' line (migration 0012) is not at the hour before `now`. */
    foldDue(now: number): boolean {
      return hotTarget(now) !== (hotFrom.get() as number);
    },
    /**
     * Moves the hot buckets' line to the hour before `now`, and the buckets it passes to the
     * table on their side, in the same transaction: up once an hour; down only after the clock
     * went back (a clock that once jumped ahead would otherwise keep every payment out of the hot
     * table until it caught up). Returns the buckets moved.
     */
    fold(now: number): number {
      const target = hotTarget(now);
      const line = hotFrom.get() as number;
      if (target === line) return 0;
      let moved: number;
      if (target > line) {
        foldIn.run(target);
        moved = foldOut.run(target).changes;
      } else {
        unfoldIn.run(target, line);
        moved = unfoldOut.run(target, line).changes;
      }
      moveLine.run(target);
      return moved;
    },
  };
}
export type CapRowsMover = ReturnType<typeof createCapRowsMover>;
