import type { Db } from './db.js';

export type LoginFailures = { email: string; failures: number; windowStart: number; lockedUntil: number };

type Raw = { email: string; failures: number; window_start: number; locked_until: number };

/** Recent failed dashboard sign-ins per email (known or not), for the lockout. */
export function createLoginFailureStore(db: Db) {
  const byEmail = db.prepare('SELECT email, failures, window_start, locked_until FROM dashboard_login_failures WHERE email = ?');
  const upsert = db.prepare(`INSERT INTO dashboard_login_failures (email, failures, window_start, locked_until) VALUES (?, ?, ?, ?)
    ON CONFLICT (email) DO UPDATE SET failures = excluded.failures, window_start = excluded.window_start, locked_until = excluded.locked_until`);
  const remove = db.prepare('DELETE FROM dashboard_login_failures WHERE email = ?');
  const prune = db.prepare('DELETE FROM dashboard_login_failures WHERE window_start < ? AND locked_until < ?');
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
    /** Drops rows that can no longer affect a decision, so guessed emails do not pile up. */
    prune(windowStartBefore: number, now: number): number {
      return prune.run(windowStartBefore, now).changes;
    },
  };
}
export type LoginFailureStore = ReturnType<typeof createLoginFailureStore>;
