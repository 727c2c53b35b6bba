import type { Db } from './db.js';
import type { DashboardSession, DashboardSessionRepository } from './port.js';
import type { Synchronous } from './syncTables.js';

type Raw = { token_hash: Buffer; user_id: string; csrf_token: string; created_at: number; expires_at: number };

function toSession(r: Raw): DashboardSession {
  return { tokenHash: r.token_hash, userId: r.user_id, csrfToken: r.csrf_token, createdAt: r.created_at, expiresAt: r.expires_at };
}

/** Dashboard sign-in sessions, keyed by the hash of their token. */
export function createDashboardSessionStore(db: Db): Synchronous<DashboardSessionRepository> {
  const insert = db.prepare('INSERT INTO dashboard_sessions (token_hash, user_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)');
  const byHash = db.prepare('SELECT token_hash, user_id, csrf_token, created_at, expires_at FROM dashboard_sessions WHERE token_hash = ?');
  const remove = db.prepare('DELETE FROM dashboard_sessions WHERE token_hash = ?');
  const removeExpired = db.prepare('DELETE FROM dashboard_sessions WHERE expires_at <= ?');
  const removeByUser = db.prepare('DELETE FROM dashboard_sessions WHERE user_id = ?');
  return {
    insert(s: DashboardSession): void {
      insert.run(s.tokenHash, s.userId, s.csrfToken, s.createdAt, s.expiresAt);
    },
    get(tokenHash: Buffer): DashboardSession | undefined {
      const r = byHash.get(tokenHash) as Raw | undefined;
      return r && toSession(r);
    },
    delete(tokenHash: Buffer): boolean {
      return remove.run(tokenHash).changes > 0;
    },
    deleteExpired(now: number): number {
      return removeExpired.run(now).changes;
    },
    deleteByUser(userId: string): number {
      return removeByUser.run(userId).changes;
    },
  };
}
export type DashboardSessionStore = ReturnType<typeof createDashboardSessionStore>;
