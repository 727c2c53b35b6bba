import type { Db } from './db.js';
import type { ApprovalRepository, ApprovalRow, ApprovalStatus } from './port.js';
import type { Synchronous } from './syncTables.js';

type Raw = {
  id: string; org_id: string; agent_id: string; transaction_id: string; status: ApprovalStatus; created_at: number;
  expires_at: number; decided_at: number | null; decided_by: string; note: string;
};

const COLUMNS = 'id, org_id, agent_id, transaction_id, status, created_at, expires_at, decided_at, decided_by, note';

function toRow(r: Raw): ApprovalRow {
  return {
    id: r.id, orgId: r.org_id, agentId: r.agent_id, transactionId: r.transaction_id, status: r.status, createdAt: r.created_at,
    expiresAt: r.expires_at, decidedAt: r.decided_at, decidedBy: r.decided_by, note: r.note,
  };
}

/** Approval requests. Decisions are guarded by `status = 'pending'` so each happens once. */
export function createApprovalStore(db: Db): Synchronous<ApprovalRepository> {
  const insert = db.prepare(`INSERT INTO approvals (${COLUMNS}) VALUES (@id, @orgId, @agentId, @transactionId, @status, @createdAt,
    @expiresAt, @decidedAt, @decidedBy, @note)`);
  const byId = db.prepare(`SELECT ${COLUMNS} FROM approvals WHERE id = ?`);
  const byOrg = db.prepare(`SELECT ${COLUMNS} FROM approvals WHERE org_id = ? ORDER BY created_at DESC, id DESC LIMIT 500`);
  const byOrgStatus = db.prepare(`SELECT ${COLUMNS} FROM approvals WHERE org_id = ? AND status = ? ORDER BY created_at DESC, id DESC LIMIT 500`);
  const decide = db.prepare(`UPDATE approvals SET status = ?, decided_at = ?, decided_by = ?, note = ? WHERE id = ? AND status = 'pending' RETURNING created_at`).pluck();
  // Served by the approvals_pending index: cheap enough to read at every metrics scrape.
  const pendingCount = db.prepare(`SELECT count(*) FROM approvals WHERE status = 'pending'`).pluck();
  let onDecided: ((status: 'approved' | 'denied', waitedMs: number) => void) | undefined;
  const expire = db.prepare(`UPDATE approvals SET status = 'expired' WHERE id = ? AND status = 'pending'`);
  const due = db.prepare(`SELECT ${COLUMNS} FROM approvals WHERE status = 'pending' AND expires_at <= ? LIMIT 1000`);
  return {
    insert(a: ApprovalRow): void {
      insert.run(a);
    },
    get(id: string): ApprovalRow | undefined {
      const r = byId.get(id) as Raw | undefined;
      return r && toRow(r);
    },
    listByOrg(orgId: string, status?: string): ApprovalRow[] {
      const rows = (status ? byOrgStatus.all(orgId, status) : byOrg.all(orgId)) as Raw[];
      return rows.map(toRow);
    },
    decide(id: string, status: 'approved' | 'denied', now: number, by: string, note: string): boolean {
      const createdAt = decide.get(status, now, by, note, id) as number | undefined;
      if (createdAt === undefined) return false;
      onDecided?.(status, now - createdAt);
      return true;
    },
    /** Approval requests waiting for a human right now. */
    countPending(): number {
      return pendingCount.get() as number;
    },
    /**
     * Calls `listener` for each decision as it is recorded, with how long the request waited
     * (metrics). Inside the deciding transaction: keep it to arithmetic. One listener.
     */
    onDecided(listener: (status: 'approved' | 'denied', waitedMs: number) => void): void {
      onDecided = listener;
    },
    expire(id: string): boolean {
      return expire.run(id).changes === 1;
    },
    /** Pending approvals whose window has closed, oldest first within one sweep batch. */
    due(now: number): ApprovalRow[] {
      return (due.all(now) as Raw[]).map(toRow);
    },
  };
}
export type ApprovalStore = ReturnType<typeof createApprovalStore>;
