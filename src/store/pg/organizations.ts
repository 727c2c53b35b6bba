import { limitsFromStored, limitsToStored } from '../../domain/limits.js';
import type { Organization } from '../../domain/types.js';
import { num, statement, type Sql } from './sql.js';
import type { OrganizationRepository } from '../port.js';

type OrgRow = { id: string; name: string; approval_window_s: bigint; created_at: bigint; address: string | null; limits: string };

const SELECT = `SELECT o.id, o.name, o.approval_window_s, o.created_at, t.address, o.limits
  FROM organizations o LEFT JOIN treasuries t ON t.org_id = o.id`;

const INSERT = statement('org.insert', 'INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES ($1, $2, $3, $4)');
const BY_ID = statement('org.byId', `${SELECT} WHERE o.id = $1`);
//: SQLite compares TEXT bytewise; PostgreSQL's default collation would not.
const ALL = statement('org.all', `${SELECT} ORDER BY o.created_at, o.id`);
const UPDATE = statement('org.update', 'UPDATE organizations SET name = $1, approval_window_s = $2 WHERE id = $3');
const SET_LIMITS = statement('org.setLimits', 'UPDATE organizations SET limits = $1 WHERE id = $2');
// Changed limits' windows start again from the ledger when next measured (migration 0019).
const DROP_STATES = statement('org.dropLimitStates', "DELETE FROM limit_states WHERE org_id = $1 AND agent_id = ''");
const INSERT_TREASURY = statement('org.insertTreasury', 'INSERT INTO treasuries (org_id, address, key_ciphertext, created_at) VALUES ($1, $2, $3, $4)');
const TREASURY_KEY = statement('org.treasuryKey', 'SELECT address, key_ciphertext FROM treasuries WHERE org_id = $1');

function toOrg(r: OrgRow): Organization {
  return { id: r.id, name: r.name, approvalWindowSeconds: num(r.approval_window_s), createdAt: num(r.created_at), treasuryAddress: r.address, limits: limitsFromStored(r.limits) };
}

/** Organizations and their treasuries (PostgreSQL twin of ../organizations.ts). */
export function createPgOrganizationStore(sql: Sql): OrganizationRepository {
  return {
    async insert(org) {
      await sql.run(INSERT, [org.id, org.name, org.approvalWindowSeconds, org.createdAt]);
    },
    async get(id) {
      const r = await sql.one<OrgRow>(BY_ID, [id]);
      return r && toOrg(r);
    },
    async update(id, name, approvalWindowSeconds) {
      await sql.run(UPDATE, [name, approvalWindowSeconds, id]);
    },
    async setLimits(id, limits) {
      await sql.run(SET_LIMITS, [limitsToStored(limits), id]);
      await sql.run(DROP_STATES, [id]);
    },
    async list() {
      return (await sql.rows<OrgRow>(ALL)).map(toOrg);
    },
    async insertTreasury(orgId, address, ciphertext, now) {
      await sql.run(INSERT_TREASURY, [orgId, address, ciphertext, now]);
    },
    async treasuryKey(orgId) {
      const r = await sql.one<{ address: string; key_ciphertext: Buffer }>(TREASURY_KEY, [orgId]);
      return r && { address: r.address, ciphertext: r.key_ciphertext };
    },
  };
}
