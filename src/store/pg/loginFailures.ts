import { num, statement, type Sql } from './sql.js';
import type { LoginFailureRepository } from '../port.js';

type Raw = { email: string; failures: bigint; window_start: bigint; locked_until: bigint };

const BY_EMAIL = statement('fail.byEmail', 'SELECT email, failures, window_start, locked_until FROM dashboard_login_failures WHERE email = $1');
const UPSERT = statement('fail.upsert', `INSERT INTO dashboard_login_failures (email, failures, window_start, locked_until) VALUES ($1, $2, $3, $4)
  ON CONFLICT (email) DO UPDATE SET failures = excluded.failures, window_start = excluded.window_start, locked_until = excluded.locked_until`);
const REMOVE = statement('fail.remove', 'DELETE FROM dashboard_login_failures WHERE email = $1');
const PRUNE = statement('fail.prune', 'DELETE FROM dashboard_login_failures WHERE window_start < $1 AND locked_until < $2');
const COUNT = statement('fail.count', 'SELECT count(*) AS n FROM dashboard_login_failures');
const TRIM_OLDEST = statement('fail.trimOldest', `DELETE FROM dashboard_login_failures WHERE email IN (
  SELECT email FROM dashboard_login_failures WHERE locked_until < $1 ORDER BY window_start LIMIT $2)`);

/** Recent failed dashboard sign-ins, per email and per client address (PostgreSQL twin of ../loginFailures.ts). */
export function createPgLoginFailureStore(sql: Sql): LoginFailureRepository {
  return {
    async get(email) {
      const r = await sql.one<Raw>(BY_EMAIL, [email]);
      return r && { email: r.email, failures: num(r.failures), windowStart: num(r.window_start), lockedUntil: num(r.locked_until) };
    },
    async put(f) {
      await sql.run(UPSERT, [f.email, f.failures, f.windowStart, f.lockedUntil]);
    },
    async clear(email) {
      await sql.run(REMOVE, [email]);
    },
    async prune(windowStartBefore, now, maxRows = Infinity) {
      let removed = await sql.run(PRUNE, [windowStartBefore, now]);
      const excess = num((await sql.one<{ n: bigint }>(COUNT))!.n) - maxRows;
      if (excess > 0) removed += await sql.run(TRIM_OLDEST, [now, excess]);
      return removed;
    },
  };
}
