import { num, statement, type Sql } from './sql.js';
import type { DashboardSession, DashboardSessionRepository } from '../port.js';

type Raw = { token_hash: Buffer; user_id: string; csrf_token: string; created_at: bigint; expires_at: bigint };

const INSERT = statement('sess.insert', 'INSERT INTO dashboard_sessions (token_hash, user_id, csrf_token, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)');
const BY_HASH = statement('sess.byHash', 'SELECT token_hash, user_id, csrf_token, created_at, expires_at FROM dashboard_sessions WHERE token_hash = $1');
const REMOVE = statement('sess.remove', 'DELETE FROM dashboard_sessions WHERE token_hash = $1');
const REMOVE_EXPIRED = statement('sess.removeExpired', 'DELETE FROM dashboard_sessions WHERE expires_at <= $1');
const REMOVE_BY_USER = statement('sess.removeByUser', 'DELETE FROM dashboard_sessions WHERE user_id = $1');

function toSession(r: Raw): DashboardSession {
  return { tokenHash: r.token_hash, userId: r.user_id, csrfToken: r.csrf_token, createdAt: num(r.created_at), expiresAt: num(r.expires_at) };
}

/** Dashboard sign-in sessions, keyed by their token's hash (PostgreSQL twin of ../dashboardSessions.ts). */
export function createPgDashboardSessionStore(sql: Sql): DashboardSessionRepository {
  return {
    async insert(s) {
      await sql.run(INSERT, [s.tokenHash, s.userId, s.csrfToken, s.createdAt, s.expiresAt]);
    },
    async get(tokenHash) {
      const r = await sql.one<Raw>(BY_HASH, [tokenHash]);
      return r && toSession(r);
    },
    async delete(tokenHash) {
      return (await sql.run(REMOVE, [tokenHash])) > 0;
    },
    async deleteExpired(now) {
      return sql.run(REMOVE_EXPIRED, [now]);
    },
    async deleteByUser(userId) {
      return sql.run(REMOVE_BY_USER, [userId]);
    },
  };
}
