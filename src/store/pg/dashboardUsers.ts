import type { DashboardRole, DashboardUser } from '../../domain/types.js';
import { num, statement, type Sql } from './sql.js';
import type { DashboardUserRepository } from '../port.js';

type Raw = {
  id: string; org_id: string; email: string; role: DashboardRole; created_at: bigint; disabled: bigint;
  password_salt: Buffer; password_hash: Buffer; password_params: string;
};

const COLUMNS = 'id, org_id, email, role, created_at, disabled, password_salt, password_hash, password_params';
const INSERT = statement('user.insert', `INSERT INTO dashboard_users (id, org_id, email, role, password_salt, password_hash, password_params, created_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`);
const BY_EMAIL = statement('user.byEmail', `SELECT ${COLUMNS} FROM dashboard_users WHERE email = $1`);
const BY_ID = statement('user.byId', `SELECT ${COLUMNS} FROM dashboard_users WHERE id = $1`);
const BY_ORG = statement('user.byOrg', `SELECT ${COLUMNS} FROM dashboard_users WHERE org_id = $1 ORDER BY created_at, id`);
const ENABLED_OWNERS = statement('user.enabledOwners',
  "SELECT count(*) AS n FROM dashboard_users WHERE org_id = $1 AND role = 'owner' AND disabled = 0");
const SET_DISABLED = statement('user.setDisabled', 'UPDATE dashboard_users SET disabled = $1 WHERE id = $2');
const SET_PASSWORD = statement('user.setPassword', 'UPDATE dashboard_users SET password_salt = $1, password_hash = $2, password_params = $3 WHERE id = $4');
const REMOVE = statement('user.remove', 'DELETE FROM dashboard_users WHERE id = $1');

function toUser(r: Raw): DashboardUser {
  return { id: r.id, orgId: r.org_id, email: r.email, role: r.role, createdAt: num(r.created_at), disabled: num(r.disabled) === 1 };
}

/** Dashboard users (PostgreSQL twin of ../dashboardUsers.ts); emails stored lower-cased. */
export function createPgDashboardUserStore(sql: Sql): DashboardUserRepository {
  return {
    async insert(user, password) {
      await sql.run(INSERT, [user.id, user.orgId, user.email, user.role, password.salt, password.hash, password.params, user.createdAt]);
    },
    async findForSignIn(email) {
      const r = await sql.one<Raw>(BY_EMAIL, [email]);
      return r && { user: toUser(r), password: { salt: r.password_salt, hash: r.password_hash, params: r.password_params } };
    },
    async getByEmail(email) {
      const r = await sql.one<Raw>(BY_EMAIL, [email]);
      return r && toUser(r);
    },
    async get(id) {
      const r = await sql.one<Raw>(BY_ID, [id]);
      return r && toUser(r);
    },
    async listByOrg(orgId) {
      return (await sql.rows<Raw>(BY_ORG, [orgId])).map(toUser);
    },
    async countEnabledOwners(orgId) {
      return num((await sql.one<{ n: bigint }>(ENABLED_OWNERS, [orgId]))!.n);
    },
    async setDisabled(id, disabled) {
      await sql.run(SET_DISABLED, [disabled ? 1 : 0, id]);
    },
    async setPassword(id, password) {
      await sql.run(SET_PASSWORD, [password.salt, password.hash, password.params, id]);
    },
    async delete(id) {
      return (await sql.run(REMOVE, [id])) > 0;
    },
  };
}
