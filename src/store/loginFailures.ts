import type { Db } from './db.js';
import type { LoginFailureRepository, LoginFailures } from './port.js';
import type { Synchronous } from './syncTables.js';

type Raw = { email: string; failures: number; window_start: number; locked_until: number };

/**
 * Recent failed dashboard sign-ins, for the lockouts: one row per email (known or not) and one per
 * client address. Address rows are keyed `address <ip>`; that key has no '@', so it can never be
 * an email (normalizeEmail requires one).
 */
export function createLoginFailureStore(db: Db): Synchronous<LoginFailureRepository> {
  const byEmail = db.prepare('SELECT email, failures, window_start, locked_until FROM dashboard_login_failures WHERE email = ?');
  const upsert = db.prepare(`INSERT INTO dashboard_login_failures (email, failures, window_start, locked_until) VALUES (?, ?, ?, ?)
    ON CONFLICT (email) DO UPDATE SET failures = excluded.failures, window_start = excluded.window_start, locked_until = excluded.locked_until`);
  const remove = db.prepare('DELETE FROM dashboard_login_failures WHERE email = ?');
  const prune = db.prepare('DELETE FROM dashboard_login_failures WHERE window_start < ? AND locked_until < ?');
  const count = db.prepare('SELECT count(*) FROM dashboard_login_failures').pluck();
  const trimOldest = db.prepare(`DELETE FROM dashboard_login_failures WHERE email IN (
    SELECT email FROM dashboard_login_failures WHERE locked_until < ? ORDER BY window_start LIMIT ?)`);
  return {
    get(email: string): LoginFailures | undefined {
      const r = byEmail.get(email) as Raw | undefined;
      return r && { email: r.email, failures: r.failures, windowStart: r.window_start, lockedUntil: r.locked_until };
    },
    put(f: LoginFailures): void {
      upsert.run(f.email, f.failures, f.windowStart, f.lockedUntil);
    },
    clear(email: string): void {
      remove.run(email);
    },
    /**
     * Drops rows that can no longer affect a decision, so guessed emails do not pile up; then, if
     * more than `maxRows` remain, the unlocked rows with the oldest windows until `maxRows` do.
     */
    prune(windowStartBefore: number, now: number, maxRows = Infinity): number {
      let removed = prune.run(windowStartBefore, now).changes;
      const excess = (count.get() as number) - maxRows;
      if (excess > 0) removed += trimOldest.run(now, excess).changes;
      return removed;
    },
  };
}
export type LoginFailureStore = ReturnType<typeof createLoginFailureStore>;
