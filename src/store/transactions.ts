import type { Db } from './db.js';
import type { ChainState, TransactionRecord } from '../domain/types.js';
import { holdsCap, type InitialState, type TransactionState } from '../domain/transactionState.js';
import type { TransactionFilter, TransactionRepository } from './port.js';
import type { Synchronous } from './syncTables.js';

type TxRow = {
  id: string; org_id: string; agent_id: string; type: string; status: string; chain_id: bigint;
  recipient: string; amount_micros: bigint; reason: string; service_slug: string; approval_id: string | null;
  created_at: bigint; submit_status: string | null; tx_hash: string | null; block_number: bigint | null; confirmations: bigint | null;
  network_fee_wei: string | null; policy_version: bigint | number | null;
};

const COLUMNS = `id, org_id, agent_id, type, status, chain_id, recipient, amount_micros, reason, service_slug, approval_id, created_at,
  submit_status, tx_hash, block_number, confirmations, network_fee_wei, policy_version`;

function toTx(r: TxRow): TransactionRecord {
  return {
    id: r.id, orgId: r.org_id, agentId: r.agent_id, type: r.type, status: r.status as TransactionState, chainId: Number(r.chain_id),
    recipient: r.recipient, amountMicros: BigInt(r.amount_micros), reason: r.reason, serviceSlug: r.service_slug,
    approvalId: r.approval_id, createdAt: Number(r.created_at), policyVersion: r.policy_version === null ? null : Number(r.policy_version),
    // The chain side (migration 0008) only for raw transactions the service submits.
    ...(r.submit_status === null ? {} : {
      chain: {
        status: r.submit_status as ChainState, txHash: r.tx_hash, blockNumber: r.block_number === null ? null : Number(r.block_number),
        confirmations: r.confirmations === null ? null : Number(r.confirmations), networkFeeWei: r.network_fee_wei,
      },
    }),
  };
}

/** The ledger: every payment request, decision and ping. */
export function createTransactionStore(db: Db): Synchronous<TransactionRepository> {
  const insertRecord = db.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, recipient,
    amount_micros, holds_cap, cap_at, reason, service_slug, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const listCache = new Map<string, ReturnType<Db['prepare']>>();
  // By transactions_by_org's (org_id, created_at) range: reads only the organization's last few minutes.
  const pingInRange = db.prepare(`SELECT 1 FROM transactions
    WHERE org_id = ? AND created_at > ? AND created_at <= ? AND agent_id = ? AND type = 'ping' LIMIT 1`);
  return {
    /** Whether the agent has a ping row created in (after, upTo]. */
    hasPingBetween(orgId: string, agentId: string, after: number, upTo: number): boolean {
      return pingInRange.get(orgId, after, upTo, agentId) !== undefined;
    },
    /** A new ledger row (a ping); it holds the cap exactly when its state does. */
    insert(tx: TransactionRecord & { status: InitialState }): void {
      insertRecord.run(tx.id, tx.orgId, tx.agentId, tx.type, tx.status, tx.chainId, tx.recipient, tx.amountMicros,
        holdsCap(tx.status) ? 1 : 0, tx.createdAt, tx.reason, tx.serviceSlug, tx.createdAt, tx.createdAt);
    },
    /** One page, newest first. Filters only add fixed SQL fragments; values are always bound. */
    list(f: TransactionFilter): TransactionRecord[] {
      const where = ['org_id = @orgId'];
      const params: Record<string, string | number> = { orgId: f.orgId, limit: f.limit };
      if (f.agentId) { where.push('agent_id = @agentId'); params.agentId = f.agentId; }
      if (f.status) { where.push('status = @status'); params.status = f.status; }
      if (f.from !== undefined) { where.push('created_at >= @from'); params.from = f.from; }
      if (f.to !== undefined) { where.push('created_at < @to'); params.to = f.to; }
      if (f.before) {
        where.push('(created_at < @beforeAt OR (created_at = @beforeAt AND id < @beforeId))');
        params.beforeAt = f.before.createdAt;
        params.beforeId = f.before.id;
      }
      const sql = `SELECT ${COLUMNS} FROM transactions WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT @limit`;
      let stmt = listCache.get(sql);
      if (!stmt) {
        stmt = db.prepare(sql).safeIntegers(true);
        listCache.set(sql, stmt);
      }
      const rows = stmt.all(params) as TxRow[];
      return rows.map(toTx);
    },
  };
}
export type TransactionStore = ReturnType<typeof createTransactionStore>;
