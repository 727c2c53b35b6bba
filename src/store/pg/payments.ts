import type { ChainState } from '../../domain/types.js';
import { holdsCap, type NextState, type TransactionState } from '../../domain/transactionState.js';
import {
  capHourOf, HELD_BY_OTHERS_SQL, historyRowOf, holdingRowOf, REQUEST_HISTORY_SQL, splitsText,
} from '../payments.js';
import { coveredParams, keyOf, limitStatesSql, minus, NO_END, overdueIn, plus, sumsOf, useOf, type OverdueRow, type Sums } from '../limitStates.js';
import { num, numOrNull, statement, type Sql } from './sql.js';
import type { ChainAttempt, InFlightRow, PaymentRepository, PaymentRow } from '../port.js';

/**
 * Ledger rows of payment requests (PostgreSQL twin of ../payments.ts; its header states the rules:
 * every state change is an UPDATE guarded by the state it leaves, built by `move`, and the
 * database refuses any other move). SQL is SQLite's with `$n` parameters; INSERT OR IGNORE is
 * ON CONFLICT DO NOTHING, `changes` is rowCount, SQLite's two-argument MAX is GREATEST, rowid is
 * the primary key (released_nonces) or chain_attempts.seq. Sums of BIGINT are cast back to BIGINT
 * (PostgreSQL sums them as NUMERIC) so they are read as bigint like every money column.
 *
 * Atomicity comes from the caller: inside the unit of work's SERIALIZABLE transaction the reads
 * (cap sum, released nonces, counter) and the writes that depend on them either commit together
 * or the transaction is retried.
 */
function move<From extends TransactionState>(name: string, from: From, to: NextState<From>, set: string, where: string) {
  return statement(`pay.${name}`, `UPDATE transactions SET status = '${to}', holds_cap = ${holdsCap(to) ? 1 : 0}, ${set} WHERE ${where} AND status = '${from}'`);
}

type Raw = {
  id: string; org_id: string; agent_id: string; type: string; status: string; chain_id: bigint; recipient: string;
  amount_micros: bigint; reason: string; service_slug: string; resource_url: string; idempotency_key: string | null;
  request_hash: string; request: string; result: string | null; approval_id: string | null; created_at: bigint; tx_hash: string | null;
  submit_status: string | null; rule: string | null;
};

const COLUMNS = `id, org_id, agent_id, type, status, chain_id, recipient, amount_micros, reason, service_slug, resource_url,
  idempotency_key, request_hash, request, result, approval_id, created_at, tx_hash, submit_status, rule`;

function toRow(r: Raw): PaymentRow {
  return {
    id: r.id, orgId: r.org_id, agentId: r.agent_id, type: r.type, status: r.status as TransactionState, chainId: num(r.chain_id),
    recipient: r.recipient, amountMicros: BigInt(r.amount_micros), reason: r.reason, serviceSlug: r.service_slug,
    resourceUrl: r.resource_url, idempotencyKey: r.idempotency_key, requestHash: r.request_hash, request: r.request,
    result: r.result, approvalId: r.approval_id, createdAt: num(r.created_at), txHash: r.tx_hash,
    submitStatus: r.submit_status as ChainState | null, rule: r.rule,
  };
}

// What counts against the cap: the hourly sums after the hour of `since`, the rows of that hour,
// less overdue pending approvals (../payments.ts capSum); one statement, one round trip. Each
// overdue row is looked up by its id: a join left the planner free to scan a time range of every
// agent's rows instead, which under SERIALIZABLE conflicts with every other agent's payments.
export const CAP_SUM = statement('pay.capSum', `SELECT
    (SELECT COALESCE(SUM(total), 0) FROM cap_buckets WHERE agent_id = $1 AND bucket > $2)::bigint AS hours,
    (SELECT COALESCE(SUM(amount_micros), 0) FROM transactions WHERE agent_id = $1 AND holds_cap = 1 AND cap_at > $3 AND cap_at < $4)::bigint AS edge,
    (SELECT COALESCE(SUM((SELECT t.amount_micros FROM transactions t WHERE t.id = a.transaction_id AND t.holds_cap = 1 AND t.cap_at > $3)), 0)
     FROM approvals a WHERE a.agent_id = $1 AND a.status = 'pending' AND a.expires_at <= $5)::bigint AS overdue`);
/** A window limit's running sums (../limitStates.ts); FOR UPDATE in a write, so two decisions take turns on it. */
const LIMIT_SQL = limitStatesSql('postgres');
const LIMIT_STATE = statement('limit.state', LIMIT_SQL.state);
const LIMIT_STATE_LOCKED = statement('limit.stateLocked', `${LIMIT_SQL.state} FOR UPDATE`);
const LIMIT_SCAN = statement('limit.scan', LIMIT_SQL.scan);
const LIMIT_OVERDUE = statement('limit.overdue', LIMIT_SQL.overdue);
const LIMIT_OWN = statement('limit.own', LIMIT_SQL.own);
const LIMIT_INSERT = statement('limit.insert', `${LIMIT_SQL.insert} ON CONFLICT DO NOTHING`);
const LIMIT_UPDATE = statement('limit.update', LIMIT_SQL.update);
/** SQLite's text with numbered parameters: the two stores read the same rows the same way. */
const numbered = (text: string) => { let n = 0; return text.replace(/\?/g, () => `$${++n}`); };
const REQUEST_HISTORY = statement('pay.requestHistory', numbered(REQUEST_HISTORY_SQL));
const HELD_BY_OTHERS = statement('pay.heldByOthers', numbered(HELD_BY_OTHERS_SQL));
const BY_KEY = statement('pay.byKey', `SELECT ${COLUMNS} FROM transactions WHERE agent_id = $1 AND idempotency_key = $2`);
const KEYLESS_BY_ID = statement('pay.keylessById',
  `SELECT ${COLUMNS} FROM transactions WHERE id = $1 AND agent_id = $2 AND idempotency_key IS NULL AND type != 'ping'`);
const BY_ID = statement('pay.byId', `SELECT ${COLUMNS} FROM transactions WHERE id = $1`);
const INSERT = statement('pay.insert', `INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, recipient, amount_micros,
  holds_cap, cap_at, reason, service_slug, resource_url, idempotency_key, request_hash, request, result, approval_id, created_at, updated_at, fee_gwei, rule, policy_version, split_recipients)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $10, $10, $19, $20, $21, $22)`);
// A raw transaction settles only while the row still holds the nonce it was signed with, not just
// while it is `signing`: another replica's stale-signing repair may have taken the row back (its
// nonce handed back, maybe to another payment) and a repeat reserved it again with a new nonce;
// the first signature must not settle that reservation (test/replicas/staleRepairRace.test.ts).
const SETTLE = move('settle', 'signing', 'signed', 'result = $1, submit_status = $2, updated_at = $3',
  'id = $4 AND ($5::bigint IS NULL OR nonce = $5::bigint)');
const SUBMITTED = statement('pay.submitted', `UPDATE transactions SET submit_status = 'submitted', tx_hash = $1, updated_at = $2
  WHERE id = $3 AND status = 'signed' AND submit_status = 'pending'`);
// Up to the limit per organization, as on SQLite (store/payments.ts): one treasury's stuck backlog
// at low nonces took every row of the batch, so another treasury's payments were never broadcast
// (test/adversarial/submitIsolation.test.ts, run on both stores). The window numbers ids only,
// in SQLite's order: NULL first (PostgreSQL puts it last), ties by id compared bytewise.
const UNSUBMITTED = statement('pay.unsubmitted', `SELECT t.id, t.result FROM (SELECT id,
  ROW_NUMBER() OVER (PARTITION BY org_id ORDER BY nonce NULLS FIRST, id COLLATE "C") AS n FROM transactions WHERE submit_status = 'pending' AND chain_id = $1) w
  JOIN transactions t ON t.id = w.id WHERE w.n <= $2 ORDER BY t.nonce NULLS FIRST, t.id COLLATE "C"`);
const SUBMITTED_AT = statement('pay.submittedAt',
  `UPDATE transactions SET broadcast_at = $1 WHERE id = $2 AND submit_status = 'submitted' AND broadcast_at IS NULL`);
const IN_FLIGHT = statement('pay.inFlight', `SELECT t.id, t.org_id, t.agent_id, t.nonce, t.result, t.tx_hash, t.submit_status, t.broadcast_at, t.reason
  FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY org_id ORDER BY nonce NULLS FIRST, id COLLATE "C") AS n FROM transactions
    WHERE submit_status IN ('submitted', 'dropped', 'replaced') AND chain_id = $1) w
  JOIN transactions t ON t.id = w.id WHERE w.n <= $2 ORDER BY t.nonce NULLS FIRST, t.id COLLATE "C"`);
const ATTEMPTS_OF = statement('pay.attemptsOf', `SELECT hash, kind, serialized, gas, max_fee_per_gas, max_priority_fee_per_gas, created_at
  FROM chain_attempts WHERE transaction_id = $1 ORDER BY created_at, seq`);
// Parameters in a SELECT list have no column to take their type from: cast them.
const INSERT_ATTEMPT = statement('pay.insertAttempt', `INSERT INTO chain_attempts (transaction_id, hash, kind, serialized, gas, max_fee_per_gas, max_priority_fee_per_gas, created_at)
  SELECT id, $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::bigint FROM transactions
  WHERE id = $8 AND status = 'signed' AND submit_status IN ('pending', 'submitted', 'dropped', 'replaced')`);
const ACCEPTED = statement('pay.accepted', `UPDATE transactions SET submit_status = $1, tx_hash = $2, broadcast_at = $3, updated_at = $4
  WHERE id = $5 AND status = 'signed' AND submit_status IN ('pending', 'submitted', 'dropped', 'replaced')`);
const DROPPED = statement('pay.dropped', `UPDATE transactions SET submit_status = 'dropped', updated_at = $1
  WHERE id = $2 AND status = 'signed' AND submit_status IN ('submitted', 'replaced')`);
const MINED = statement('pay.mined', `UPDATE transactions SET tx_hash = $1, block_number = $2, confirmations = $3, network_fee_wei = $4, updated_at = $5
  WHERE id = $6 AND status = 'signed' AND submit_status IN ('submitted', 'dropped', 'replaced')`);
const CONFIRMED = statement('pay.confirmed', `UPDATE transactions SET submit_status = 'confirmed', tx_hash = $1, block_number = $2, confirmations = $3,
  network_fee_wei = $4, updated_at = $5 WHERE id = $6 AND status = 'signed' AND submit_status IN ('submitted', 'dropped', 'replaced')`);
const REVERTED = move('reverted', 'signed', 'reverted',
  `submit_status = 'reverted', tx_hash = $1, block_number = $2, confirmations = $3, network_fee_wei = $4, reason = $5, updated_at = $6`,
  `id = $7 AND submit_status IN ('submitted', 'dropped', 'replaced')`);
const NOTE_REASON = statement('pay.noteReason', `UPDATE transactions SET reason = $1, updated_at = $2 WHERE id = $3 AND status = 'signed'`);
const MAX_SIGNED_NONCE = statement('pay.maxSignedNonce',
  `SELECT MAX(nonce) AS n FROM transactions WHERE org_id = $1 AND chain_id = $2 AND type = 'raw_transaction' AND status IN ('signed', 'reverted')`);
// The chain's pending nonce as the counter's floor: released nonces below it are spent on chain.
const RAISE_COUNTER = statement('pay.raiseCounter', `INSERT INTO account_nonces (org_id, chain_id, next_nonce) VALUES ($1, $2, $3)
  ON CONFLICT (org_id, chain_id) DO UPDATE SET next_nonce = GREATEST(account_nonces.next_nonce, excluded.next_nonce)`);
const DROP_RELEASED_BELOW = statement('pay.dropReleasedBelow', 'DELETE FROM released_nonces WHERE org_id = $1 AND chain_id = $2 AND nonce < $3');
const COUNTER_OF = statement('pay.counterOf', 'SELECT next_nonce FROM account_nonces WHERE org_id = $1 AND chain_id = $2');
const FAIL = move('fail', 'signing', 'failed', 'reason = $1, updated_at = $2', 'id = $3');
// A nonce goes back to the pool only with the row that held it, in the same transaction as the
// move out of `signing`: a signed row keeps its nonce forever.
const RELEASE_NONCE_OF = statement('pay.releaseNonceOf', `INSERT INTO released_nonces (org_id, chain_id, nonce)
  SELECT org_id, chain_id, nonce FROM transactions WHERE id = $1 AND status = 'signing' AND nonce IS NOT NULL ON CONFLICT DO NOTHING`);
const RELEASE_INTERRUPTED_NONCES = statement('pay.releaseInterruptedNonces', `INSERT INTO released_nonces (org_id, chain_id, nonce)
  SELECT org_id, chain_id, nonce FROM transactions WHERE status = 'signing' AND nonce IS NOT NULL ON CONFLICT DO NOTHING`);
const APPROVE = move('approve', 'pending_approval', 'signing', 'cap_at = $1, updated_at = $2', 'id = $3');
const MARK_APPROVED = move('markApproved', 'pending_approval', 'approved', 'cap_at = $1, updated_at = $2', 'id = $3');
const SIGN_APPROVED = move('signApproved', 'approved', 'signing', 'request = $1, cap_at = $2, updated_at = $3', 'id = $4');
const EXPIRE_APPROVED = move('expireApproved', 'approved', 'expired', 'reason = $1, updated_at = $2', 'id = $3 AND cap_at <= $4');
const OVERDUE_APPROVED = statement('pay.overdueApproved', `SELECT id FROM transactions WHERE status = 'approved' AND cap_at <= $1 LIMIT 1000`);
const DENY_APPROVED = move('denyApproved', 'approved', 'denied', 'reason = $1, updated_at = $2', 'id = $3');
const RELEASE = {
  denied: move('releaseDenied', 'pending_approval', 'denied', 'reason = $1, updated_at = $2', 'id = $3'),
  expired: move('releaseExpired', 'pending_approval', 'expired', 'reason = $1, updated_at = $2', 'id = $3'),
};
const APPROVED_ONLY = `approval_id IN (SELECT id FROM approvals WHERE status = 'approved')`;
const DECISION_TIME = `COALESCE((SELECT a.decided_at FROM approvals a WHERE a.id = transactions.approval_id), cap_at)`;
const REAPPROVE = move('reapprove', 'signing', 'approved', `nonce = NULL, cap_at = ${DECISION_TIME}, updated_at = $1`, `id = $2 AND ${APPROVED_ONLY}`);
const REAPPROVE_ALL_SIGNING = move('reapproveAllSigning', 'signing', 'approved', `nonce = NULL, cap_at = ${DECISION_TIME}, updated_at = $1`, APPROVED_ONLY);
const REOPEN_FAILED = move('reopenFailed', 'failed', 'approved', `nonce = NULL, cap_at = ${DECISION_TIME}, updated_at = $1`,
  `approval_id IN (SELECT id FROM approvals WHERE status = 'approved' AND decided_at > $2)`);
const EXPIRE_FAILED = move('expireFailed', 'failed', 'expired', 'reason = $1, updated_at = $2',
  `approval_id IN (SELECT id FROM approvals WHERE status = 'approved' AND COALESCE(decided_at, 0) <= $3)`);
const FAIL_ALL_SIGNING = move('failAllSigning', 'signing', 'failed', `reason = 'Interrupted while signing', updated_at = $1`, 'TRUE');
const NEWEST = statement('pay.newest', 'SELECT GREATEST(COALESCE(MAX(created_at), 0), COALESCE(MAX(updated_at), 0)) AS t FROM transactions');
const NEXT_NONCE = statement('pay.nextNonce', `INSERT INTO account_nonces (org_id, chain_id, next_nonce) VALUES ($1, $2, 1)
  ON CONFLICT (org_id, chain_id) DO UPDATE SET next_nonce = account_nonces.next_nonce + 1 RETURNING next_nonce - 1 AS nonce`);
const LOWEST_RELEASED = statement('pay.lowestReleased', `DELETE FROM released_nonces WHERE (org_id, chain_id, nonce) = (
  SELECT org_id, chain_id, nonce FROM released_nonces WHERE org_id = $1 AND chain_id = $2 ORDER BY nonce LIMIT 1) RETURNING nonce`);
const RECORD_NONCE = statement('pay.recordNonce', `UPDATE transactions SET nonce = $1 WHERE id = $2 AND status = 'signing'`);

export function createPgPaymentStore(sql: Sql): PaymentRepository {
  const releaseNonceOf = (id: string) => sql.run(RELEASE_NONCE_OF, [id]);
  return {
    async newestTime() {
      return num((await sql.one<{ t: bigint }>(NEWEST))!.t);
    },
    async committedSince(agentId, since, now) {
      sql.contend(`cap:${agentId}`);
      const { bucket, end } = capHourOf(since);
      const r = (await sql.one<{ hours: bigint; edge: bigint; overdue: bigint }>(CAP_SUM, [agentId, bucket, since, end, now]))!;
      return r.hours + r.edge - r.overdue;
    },
    async windowUses(q) {
      if (q.windows.length === 0) return [];
      // Every payment of the organization reads and may change what its windows hold.
      sql.contend(`limits:${q.orgId}`);
      const now = BigInt(q.now);
      const overdue = (await sql.tuples(LIMIT_OVERDUE, [q.orgId, now])) as unknown as OverdueRow[];
      const out = [];
      for (const w of q.windows) {
        const key = keyOf(q, w);
        const width = key[3];
        const scan = async (from: bigint, to: bigint) => sumsOf((await sql.tuples(LIMIT_SCAN, coveredParams(q, w, from, to)))[0]);
        let state = (await sql.tuples(sql.writable ? LIMIT_STATE_LOCKED : LIMIT_STATE, key))[0];
        if (!state && sql.writable) {
          // Another replica may create it first: then this one waits for it and reads it.
          await sql.run(LIMIT_INSERT, [...key, now, ...(await scan(now - width, NO_END))]);
          state = (await sql.tuples(LIMIT_STATE_LOCKED, key))[0];
        }
        let sums: Sums;
        if (!state) {
          sums = await scan(now - width, NO_END);
        } else {
          const asOf = BigInt(state[5] as bigint);
          sums = sumsOf(state);
          if (now > asOf) sums = minus(sums, await scan(asOf - width, now - width));
          else if (now < asOf) sums = plus(sums, await scan(now - width, asOf - width));
          if (sql.writable && now !== asOf) await sql.run(LIMIT_UPDATE, [...key, now, ...sums]);
        }
        sums = minus(sums, overdueIn(overdue, w));
        if (q.excludeId) sums = minus(sums, sumsOf((await sql.tuples(LIMIT_OWN, [...coveredParams(q, w, now - width, NO_END), now, q.excludeId]))[0]));
        out.push(useOf(sums));
      }
      return out;
    },
    async requestHistory(orgId, agentId, since, limit) {
      return (await sql.tuples(REQUEST_HISTORY, [orgId, since, agentId, limit])).map((r) => historyRowOf(r as Parameters<typeof historyRowOf>[0]));
    },
    async heldByOthers(orgId, agentId, since, limit) {
      return (await sql.tuples(HELD_BY_OTHERS, [orgId, since, agentId, limit])).map((r) => holdingRowOf(r as Parameters<typeof holdingRowOf>[0]));
    },
    async findByIdempotencyKey(agentId, key) {
      const r = await sql.one<Raw>(BY_KEY, [agentId, key]);
      return r && toRow(r);
    },
    async findKeylessById(agentId, id) {
      const r = await sql.one<Raw>(KEYLESS_BY_ID, [id, agentId]);
      return r && toRow(r);
    },
    async get(id) {
      const r = await sql.one<Raw>(BY_ID, [id]);
      return r && toRow(r);
    },
    async insert(row) {
      // A row holding the cap adds to the agent's cap bucket (migration 0010), the row every
      // concurrent payment of the agent writes: a retry queues on the agent's hot spot.
      if (holdsCap(row.status)) sql.contend(`cap:${row.agentId}`);
      await sql.run(INSERT, [row.id, row.orgId, row.agentId, row.type, row.status, row.chainId, row.recipient, row.amountMicros,
        holdsCap(row.status) ? 1 : 0, row.createdAt, row.reason, row.serviceSlug, row.resourceUrl, row.idempotencyKey,
        row.requestHash, row.request, row.result, row.approvalId, row.feeGwei ?? 0n, row.rule ?? null, row.policyVersion ?? null, splitsText(row.splitRecipients)]);
    },
    async settleSigned(id, result, now, submit = false, nonce) {
      return (await sql.run(SETTLE, [result, submit ? 'pending' : null, now, id, nonce ?? null])) === 1;
    },
    async markSubmitted(id, txHash, now) {
      return (await sql.run(SUBMITTED, [txHash, now, id])) === 1;
    },
    async unsubmitted(chainId, limit) {
      return sql.rows<{ id: string; result: string }>(UNSUBMITTED, [chainId, limit]);
    },
    async startBroadcastTimer(id, now) {
      await sql.run(SUBMITTED_AT, [now, id]);
    },
    async inFlight(chainId, limit) {
      const rows = await sql.rows<Record<string, unknown>>(IN_FLIGHT, [chainId, limit]);
      return rows.map((r): InFlightRow => ({
        id: r.id as string, orgId: r.org_id as string, agentId: r.agent_id as string, nonce: num(r.nonce as bigint), result: r.result as string,
        txHash: r.tx_hash as string | null, submitStatus: r.submit_status as InFlightRow['submitStatus'],
        broadcastAt: numOrNull(r.broadcast_at as bigint | null), reason: r.reason as string,
      }));
    },
    async attempts(id) {
      const rows = await sql.rows<Record<string, unknown>>(ATTEMPTS_OF, [id]);
      return rows.map((r): ChainAttempt => ({
        hash: r.hash as string, kind: r.kind as ChainAttempt['kind'], serialized: r.serialized as string, gas: BigInt(r.gas as string),
        maxFeePerGas: BigInt(r.max_fee_per_gas as string), maxPriorityFeePerGas: BigInt(r.max_priority_fee_per_gas as string),
        createdAt: num(r.created_at as bigint),
      }));
    },
    async addAttempt(id, a) {
      return (await sql.run(INSERT_ATTEMPT, [a.hash, a.kind, a.serialized, a.gas.toString(), a.maxFeePerGas.toString(),
        a.maxPriorityFeePerGas.toString(), a.createdAt, id])) === 1;
    },
    async markAccepted(id, hash, replacement, now) {
      return (await sql.run(ACCEPTED, [replacement ? 'replaced' : 'submitted', hash, now, now, id])) === 1;
    },
    async markDropped(id, now) {
      return (await sql.run(DROPPED, [now, id])) === 1;
    },
    async markMined(id, m, now) {
      return (await sql.run(MINED, [m.hash, m.blockNumber, m.confirmations, m.networkFeeWei, now, id])) === 1;
    },
    async markConfirmed(id, m, now) {
      return (await sql.run(CONFIRMED, [m.hash, m.blockNumber, m.confirmations, m.networkFeeWei, now, id])) === 1;
    },
    async markReverted(id, m, reason, now) {
      return (await sql.run(REVERTED, [m.hash, m.blockNumber, m.confirmations, m.networkFeeWei, reason, now, id])) === 1;
    },
    async noteReason(id, reason, now) {
      await sql.run(NOTE_REASON, [reason, now, id]);
    },
    async maxSignedNonce(orgId, chainId) {
      const n = (await sql.one<{ n: bigint | null }>(MAX_SIGNED_NONCE, [orgId, chainId]))!.n;
      return n === null ? undefined : num(n);
    },
    async nonceCounter(orgId, chainId) {
      const r = await sql.one<{ next_nonce: bigint }>(COUNTER_OF, [orgId, chainId]);
      return num(r?.next_nonce ?? 0n);
    },
    async raiseNonceFloor(orgId, chainId, floor) {
      await sql.run(RAISE_COUNTER, [orgId, chainId, floor]);
      await sql.run(DROP_RELEASED_BELOW, [orgId, chainId, floor]);
    },
    async markFailed(id, reason, now) {
      await releaseNonceOf(id);
      return (await sql.run(FAIL, [reason, now, id])) === 1;
    },
    async releaseSigning(id, reason, now) {
      await releaseNonceOf(id);
      if ((await sql.run(REAPPROVE, [now, id])) === 1) return 'approved';
      return (await sql.run(FAIL, [reason, now, id])) === 1 ? 'failed' : undefined;
    },
    async startSigningApproved(id, now) {
      return (await sql.run(APPROVE, [now, now, id])) === 1;
    },
    async markApproved(id, now) {
      return (await sql.run(MARK_APPROVED, [now, now, id])) === 1;
    },
    async startSigningFromApproved(id, request, now) {
      return (await sql.run(SIGN_APPROVED, [request, now, now, id])) === 1;
    },
    async expireApproved(id, decidedBy, reason, now) {
      return (await sql.run(EXPIRE_APPROVED, [reason, now, id, decidedBy])) === 1;
    },
    async overdueApproved(decidedBy) {
      return (await sql.rows<{ id: string }>(OVERDUE_APPROVED, [decidedBy])).map((r) => r.id);
    },
    async denyApproved(id, reason, now) {
      return (await sql.run(DENY_APPROVED, [reason, now, id])) === 1;
    },
    async releasePending(id, status, reason, now) {
      return (await sql.run(RELEASE[status], [reason, now, id])) === 1;
    },
    async reapproveInterrupted(now) {
      await sql.run(RELEASE_INTERRUPTED_NONCES);
      return sql.run(REAPPROVE_ALL_SIGNING, [now]);
    },
    async reopenFailedApprovals(decidedAfter, expiredReason, now) {
      const reopened = await sql.run(REOPEN_FAILED, [now, decidedAfter]);
      const expired = await sql.run(EXPIRE_FAILED, [expiredReason, now, decidedAfter]);
      return { reopened, expired };
    },
    async failInterrupted(now) {
      await sql.run(RELEASE_INTERRUPTED_NONCES);
      return sql.run(FAIL_ALL_SIGNING, [now]);
    },
    async allocateNonce(orgId, chainId, rowId) {
      sql.contend(`nonce:${orgId}:${chainId}`);
      const reused = await sql.one<{ nonce: bigint }>(LOWEST_RELEASED, [orgId, chainId]);
      const nonce = num(reused?.nonce ?? (await sql.one<{ nonce: bigint }>(NEXT_NONCE, [orgId, chainId]))!.nonce);
      if ((await sql.run(RECORD_NONCE, [nonce, rowId])) !== 1) throw new Error(`no signing row ${rowId} to hold nonce ${nonce}`);
      return nonce;
    },
  };
}
