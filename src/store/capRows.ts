import type { Db } from './db.js';

/** How far behind the clock the horizon is kept: rows this young are read from the time index. */
export const CAP_ROWS_LAG_MS = 2_000;
/** How often the mover looks for rows to copy. */
export const CAP_ROWS_EVERY_MS = 500;
/** Rows copied per move at most, so one move holds the writer for a few milliseconds only. */
export const CAP_ROWS_PER_MOVE = 2_000;

/**
 * The mover of migration 0011: raises cap_horizon.horizon and copies the holding rows it passes into
 * cap_rows, so the cap sum finds them by agent. Run inside a write transaction (the writer
 * connection's): the triggers keep cap_rows exact for every other change, and a move is
 * all-or-nothing with its horizon.
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
  };
}
export type CapRowsMover = ReturnType<typeof createCapRowsMover>;
