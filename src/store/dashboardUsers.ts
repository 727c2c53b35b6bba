import type { DashboardRole, DashboardUser } from '../domain/types.js';
import type { Db } from './db.js';
import type { DashboardUserRepository, PasswordRecord } from './port.js';
import type { Synchronous } from './syncTables.js';

type Raw = {
  id: string; org_id: string; email: string; role: DashboardRole; created_at: number; disabled: number;
  password_salt: Buffer; password_hash: Buffer; password_params: string;
};

function toUser(r: Raw): DashboardUser {
  return { id: r.id, orgId: r.org_id, email: r.email, role: r.role, createdAt: r.created_at, disabled: r.disabled === 1 };
}

const COLUMNS = 'id, org_id, email, role, created_at, disabled, password_salt, password_hash, password_params';

/** Dashboard users. Emails are stored lower-cased, so the UNIQUE constraint ignores case. */
export function createDashboardUserStore(db: Db): Synchronous<DashboardUserRepository> {
  const insert = db.prepare(`INSERT INTO dashboard_users (id, org_id, email, role, password_salt, password_hash, password_params, created_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)`);
  const byEmail = db.prepare(`SELECT ${COLUMNS} FROM dashboard_users WHERE email = ?`);
  const byId = db.prepare(`SELECT ${COLUMNS} FROM dashboard_users WHERE id = ?`);
  const byOrg = db.prepare(`SELECT ${COLUMNS} FROM dashboard_users WHERE org_id = ? ORDER BY created_at, id`);
  const enabledOwners = db.prepare("SELECT count(*) AS n FROM dashboard_users WHERE org_id = ? AND role = 'owner' AND disabled = 0");
  const setDisabled = db.prepare('UPDATE dashboard_users SET disabled = ? WHERE id = ?');
  const setPassword = db.prepare('UPDATE dashboard_users SET password_salt = ?, password_hash = ?, password_params = ? WHERE id = ?');
  const remove = db.prepare('DELETE FROM dashboard_users WHERE id = ?');
  return {
    insert(user: DashboardUser, password: PasswordRecord): void {
      insert.run(user.id, user.orgId, user.email, user.role, password.salt, password.hash, password.params, user.createdAt);
    },
    /** The user and their password record, for sign-in only. */
    findForSignIn(email: string): { user: DashboardUser; password: PasswordRecord } | undefined {
      const r = byEmail.get(email) as Raw | undefined;
      return r && { user: toUser(r), password: { salt: r.password_salt, hash: r.password_hash, params: r.password_params } };
    },
    getByEmail(email: string): DashboardUser | undefined {
      const r = byEmail.get(email) as Raw | undefined;
      return r && toUser(r);
    },
    get(id: string): DashboardUser | undefined {
      const r = byId.get(id) as Raw | undefined;
      return r && toUser(r);
    },
    listByOrg(orgId: string): DashboardUser[] {
      return (byOrg.all(orgId) as Raw[]).map(toUser);
    },
    /** How many owners of an organization may still sign in. */
    countEnabledOwners(orgId: string): number {
      return (enabledOwners.get(orgId) as { n: number }).n;
    },
    setDisabled(id: string, disabled: boolean): void {
      setDisabled.run(disabled ? 1 : 0, id);
    },
    setPassword(id: string, password: PasswordRecord): void {
      setPassword.run(password.salt, password.hash, password.params, id);
    },
    /** Removes the user row; the caller deletes their sessions first (they reference it). */
    delete(id: string): boolean {
      return remove.run(id).changes > 0;
    },
  };
}
export type DashboardUserStore = ReturnType<typeof createDashboardUserStore>;
