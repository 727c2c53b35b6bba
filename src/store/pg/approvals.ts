import { num, numOrNull, statement, type Sql } from './sql.js';
import type { ApprovalRepository, ApprovalRow, ApprovalStatus } from '../port.js';

type Raw = {
  id: string; org_id: string; agent_id: string; transaction_id: string; status: ApprovalStatus; created_at: bigint;
  expires_at: bigint; decided_at: bigint | null; decided_by: string; note: string;
};

const COLUMNS = 'id, org_id, agent_id, transaction_id, status, created_at, expires_at, decided_at, decided_by, note';
const INSERT = statement('appr.insert', `INSERT INTO approvals (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`);
const BY_ID = statement('appr.byId', `SELECT ${COLUMNS} FROM approvals WHERE id = $1`);
const BY_ORG = statement('appr.byOrg', `SELECT ${COLUMNS} FROM approvals WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT 500`);
const BY_ORG_STATUS = statement('appr.byOrgStatus',
  `SELECT ${COLUMNS} FROM approvals WHERE org_id = $1 AND status = $2 ORDER BY created_at DESC, id DESC LIMIT 500`);
const DECIDE = statement('appr.decide',
  `UPDATE approvals SET status = $1, decided_at = $2, decided_by = $3, note = $4 WHERE id = $5 AND status = 'pending' RETURNING created_at`);
// Served by the approvals_pending index: cheap enough to read at every metrics scrape.
const PENDING_COUNT = statement('appr.pendingCount', `SELECT count(*) AS n FROM approvals WHERE status = 'pending'`);
const EXPIRE = statement('appr.expire', `UPDATE approvals SET status = 'expired' WHERE id = $1 AND status = 'pending'`);
// Ordered (SQLite returns them in its index's order, by expiry) so each sweep batch is the oldest.
const DUE = statement('appr.due', `SELECT ${COLUMNS} FROM approvals WHERE status = 'pending' AND expires_at <= $1 ORDER BY expires_at, id LIMIT 1000`);

function toRow(r: Raw): ApprovalRow {
  return {
    id: r.id, orgId: r.org_id, agentId: r.agent_id, transactionId: r.transaction_id, status: r.status, createdAt: num(r.created_at),
    expiresAt: num(r.expires_at), decidedAt: numOrNull(r.decided_at), decidedBy: r.decided_by, note: r.note,
  };
}

/** A decision's listener (metrics), shared by every binding of the table group to a connection. */
export type ApprovalHooks = { onDecided?: (status: 'approved' | 'denied', waitedMs: number) => void };

/**
 * Approval requests (PostgreSQL twin of ../approvals.ts). Decisions are guarded by
 * `status = 'pending'` so each happens once, on whichever replica. The decision listener runs
 * after the deciding transaction commits (SQLite calls it inside), so a transaction that rolls
 * back or is retried after a serialization failure is not counted.
 */
export function createPgApprovalStore(sql: Sql, hooks: ApprovalHooks = {}): ApprovalRepository {
  return {
    async insert(a) {
      await sql.run(INSERT, [a.id, a.orgId, a.agentId, a.transactionId, a.status, a.createdAt, a.expiresAt, a.decidedAt, a.decidedBy, a.note]);
    },
    async get(id) {
      const r = await sql.one<Raw>(BY_ID, [id]);
      return r && toRow(r);
    },
    async listByOrg(orgId, status) {
      return (status ? await sql.rows<Raw>(BY_ORG_STATUS, [orgId, status]) : await sql.rows<Raw>(BY_ORG, [orgId])).map(toRow);
    },
    async decide(id, status, now, by, note) {
      const r = await sql.one<{ created_at: bigint }>(DECIDE, [status, now, by, note, id]);
      if (r === undefined) return false;
      const waited = now - num(r.created_at);
      sql.afterCommit(() => hooks.onDecided?.(status, waited));
      return true;
    },
    async countPending() {
      return num((await sql.one<{ n: bigint }>(PENDING_COUNT))!.n);
    },
    async onDecided(listener) {
      hooks.onDecided = listener;
    },
    async expire(id) {
      return (await sql.run(EXPIRE, [id])) === 1;
    },
    async due(now) {
      return (await sql.rows<Raw>(DUE, [now])).map(toRow);
    },
  };
}
