import type { ChainState, TransactionRecord } from '../../domain/types.js';
import { holdsCap, type TransactionState } from '../../domain/transactionState.js';
import { num, numOrNull, statement, type Sql } from './sql.js';
import type { TransactionRepository } from '../port.js';

type TxRow = {
  id: string; org_id: string; agent_id: string; type: string; status: string; chain_id: bigint;
  recipient: string; amount_micros: bigint; reason: string; service_slug: string; approval_id: string | null;
  created_at: bigint; submit_status: string | null; tx_hash: string | null; block_number: bigint | null; confirmations: bigint | null;
  network_fee_wei: string | null; policy_version: bigint | number | null;
};

const COLUMNS = `id, org_id, agent_id, type, status, chain_id, recipient, amount_micros, reason, service_slug, approval_id, created_at,
  submit_status, tx_hash, block_number, confirmations, network_fee_wei, policy_version`;

const INSERT = statement('tx.insert', `INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, recipient,
  amount_micros, holds_cap, cap_at, reason, service_slug, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`);
const PING_IN_RANGE = statement('tx.pingInRange', `SELECT 1 FROM transactions
  WHERE org_id = $1 AND created_at > $2 AND created_at <= $3 AND agent_id = $4 AND type = 'ping' LIMIT 1`);

function toTx(r: TxRow): TransactionRecord {
  return {
    id: r.id, orgId: r.org_id, agentId: r.agent_id, type: r.type, status: r.status as TransactionState, chainId: num(r.chain_id),
    recipient: r.recipient, amountMicros: BigInt(r.amount_micros), reason: r.reason, serviceSlug: r.service_slug,
    approvalId: r.approval_id, createdAt: num(r.created_at), policyVersion: r.policy_version === null ? null : Number(r.policy_version),
    ...(r.submit_status === null ? {} : {
      chain: {
        status: r.submit_status as ChainState, txHash: r.tx_hash, blockNumber: numOrNull(r.block_number),
        confirmations: numOrNull(r.confirmations), networkFeeWei: r.network_fee_wei,
      },
    }),
  };
}

/** The ledger's listing and pings (PostgreSQL twin of ../transactions.ts). */
export function createPgTransactionStore(sql: Sql): TransactionRepository {
  return {
    async hasPingBetween(orgId, agentId, after, upTo) {
      return (await sql.one(PING_IN_RANGE, [orgId, after, upTo, agentId])) !== undefined;
    },
    async insert(tx) {
      await sql.run(INSERT, [tx.id, tx.orgId, tx.agentId, tx.type, tx.status, tx.chainId, tx.recipient, tx.amountMicros,
        holdsCap(tx.status) ? 1 : 0, tx.createdAt, tx.reason, tx.serviceSlug, tx.createdAt, tx.createdAt]);
    },
    /** One page, newest first. Filters only add fixed SQL fragments; values are always bound. */
    async list(f) {
      const values: unknown[] = [f.orgId];
      const where = ['org_id = $1'];
      const shape: string[] = [];
      const add = (key: string, fragment: (n: number) => string, ...v: unknown[]) => {
        where.push(fragment(values.length + 1));
        values.push(...v);
        shape.push(key);
      };
      if (f.agentId) add('a', (n) => `agent_id = $${n}`, f.agentId);
      if (f.status) add('s', (n) => `status = $${n}`, f.status);
      if (f.from !== undefined) add('f', (n) => `created_at >= $${n}`, f.from);
      if (f.to !== undefined) add('t', (n) => `created_at < $${n}`, f.to);
      if (f.before) add('b', (n) => `(created_at < $${n} OR (created_at = $${n} AND id < $${n + 1}))`, f.before.createdAt, f.before.id);
      values.push(f.limit);
      const text = `SELECT ${COLUMNS} FROM transactions WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT $${values.length}`;
      // One named statement per filter shape (at most 32), prepared once per connection like SQLite's listCache.
      return (await sql.rows<TxRow>(statement(`tx.list.${shape.join('') || '-'}`, text), values)).map(toTx);
    },
  };
}
