import type { Db } from './db.js';
import type { ChainState } from '../domain/types.js';
import { holdsCap, type InitialState, type NextState, type TransactionState } from '../domain/transactionState.js';
import { CAP_BUCKET_MS } from './migrations/0010_cap_buckets.js';
import { coveredParams, keyOf, limitStatesSql, minus, named, NO_END, overdueIn, plus, sumsOf, useOf, type OverdueRow, type Sums } from './limitStates.js';
import type { ChainAttempt, HoldingRow, InFlightRow, MinedVersion, PaymentRepository, PaymentRow, RequestHistoryRow, WindowsQuery, WindowUse } from './port.js';
import type { Synchronous } from './syncTables.js';

/**
 * Ledger rows of payment requests. Every state change is an UPDATE guarded by the state it
 * leaves (`WHERE status = …`), so a transition can happen once no matter who races for it. The
 * states, the allowed moves and which states hold the cap are src/domain/transactionState.ts;
 * every UPDATE here is built by `move`, typed by its from/to states, which also sets holds_cap
 * from the target state, and the database refuses any other move (migration 0006).
 *
 * A row whose approval is `approved` never becomes `failed`: a signing error, a failed write or
 * a crash sends it from signing back to approved, for the agent to collect again. An approved
 * row's cap_at is the decision time, which also starts its collection window; collection moves
 * cap_at to the signing time, and the way back to approved moves it back to the decision time.
 */
/**
 * SQL of one allowed move for the rows matching `where` (its `?` parameters follow those of
 * `set`): the status becomes `to` and holds_cap what `to` implies. An illegal move does not compile.
 */
function move<From extends TransactionState>(from: From, to: NextState<From>, set: string, where: string): string {
  return `UPDATE transactions SET status = '${to}', holds_cap = ${holdsCap(to) ? 1 : 0}, ${set} WHERE ${where} AND status = '${from}'`;
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
    id: r.id, orgId: r.org_id, agentId: r.agent_id, type: r.type, status: r.status as TransactionState, chainId: Number(r.chain_id),
    recipient: r.recipient, amountMicros: BigInt(r.amount_micros), reason: r.reason, serviceSlug: r.service_slug,
    resourceUrl: r.resource_url, idempotencyKey: r.idempotency_key, requestHash: r.request_hash, request: r.request,
    result: r.result, approvalId: r.approval_id, createdAt: Number(r.created_at), txHash: r.tx_hash,
    submitStatus: r.submit_status as ChainState | null, rule: r.rule,
  };
}

/**
 * What counts against the cap since ?: the agent's hourly sums entirely after it (cap_buckets,
 * migration 0010, and cap_buckets_hot, 0012, which holds the current hours: a short range of each
 * one's primary key, the two disjoint), the rows of the hour it falls in (those up
 * to the horizon from cap_rows, by agent and time; those above it, normally none this far back,
 * from the time index: migration 0011), less pending approvals past their window, which no
 * longer hold the cap even before a read or the sweep marks them expired (usually nothing). One
 * statement: one call per policy check; the sums are added in bigint (SQLite's + and - would
 * turn an overflow into a float).
 */
export const CAP_SUM_SQL = `SELECT
  (SELECT COALESCE(SUM(total), 0) FROM cap_buckets WHERE agent_id = ? AND bucket > ?),
  (SELECT COALESCE(SUM(total), 0) FROM cap_buckets_hot WHERE agent_id = ? AND bucket > ?),
  (SELECT COALESCE(SUM(amount_micros), 0) FROM cap_rows WHERE agent_id = ? AND cap_at > ? AND cap_at < ?),
  (SELECT COALESCE(SUM(amount_micros), 0) FROM transactions
   WHERE holds_cap = 1 AND cap_at > MAX(?, (SELECT horizon FROM cap_horizon)) AND cap_at < ? AND agent_id = ?),
  (SELECT COALESCE(SUM(t.amount_micros), 0) FROM approvals a JOIN transactions t ON t.id = a.transaction_id
   WHERE a.agent_id = ? AND a.status = 'pending' AND a.expires_at <= ? AND t.holds_cap = 1 AND t.cap_at > ?)`;

/**
 * CAP_SUM_SQL, then what bounds how long its answer stands while nothing is written: the earliest
 * cap_at after `since` among the agent's rows up to the horizon (cap_rows), the earliest among
 * every agent's rows above it (one step into the time index; none of the agent's rows there
 * leaves the window sooner) and the earliest deadline of the agent's pending approvals still
 * ahead of `now`.
 */
export const CAP_SUM_BOUNDED_SQL = `${CAP_SUM_SQL},
  (SELECT MIN(cap_at) FROM cap_rows WHERE agent_id = ? AND cap_at > ?),
  (SELECT MIN(cap_at) FROM transactions WHERE holds_cap = 1 AND cap_at > (SELECT horizon FROM cap_horizon)),
  (SELECT MIN(expires_at) FROM approvals WHERE agent_id = ? AND status = 'pending' AND expires_at > ?)`;

/** Split recipients as stored (migration 0016): `,a,b,` so one is found by `,a,`; '' for none. */
export function splitsText(splits: readonly string[] | undefined): string {
  return splits && splits.length > 0 ? `,${splits.join(',')},` : '';
}

/** Split recipients from their stored text. */
export function splitsOf(text: string): string[] {
  return text === '' ? [] : text.slice(1, -1).split(',');
}

/** An agent's requests for a policy simulation, by the organization's time index (port.ts requestHistory). */
export const REQUEST_HISTORY_SQL = `SELECT t.id, t.created_at, t.status, t.approval_id, t.type, t.recipient, t.amount_micros, t.service_slug, t.split_recipients, t.fee_gwei,
    t.request, t.reason, t.rule, a.expires_at
  FROM transactions t LEFT JOIN approvals a ON a.id = t.approval_id
  WHERE t.org_id = ? AND t.created_at >= ? AND t.agent_id = ? AND t.type != 'ping' ORDER BY t.created_at, t.id LIMIT ?`;
/** The other agents' holding rows (port.ts heldByOthers), by transactions_limits. */
export const HELD_BY_OTHERS_SQL = `SELECT t.cap_at, CASE WHEN t.status = 'pending_approval' THEN a.expires_at END, t.recipient, t.service_slug, t.split_recipients, t.amount_micros, t.fee_gwei,
    t.created_at, CASE WHEN t.status != 'pending_approval' THEN a.decided_at END
  FROM transactions t LEFT JOIN approvals a ON a.id = t.approval_id
  WHERE t.org_id = ? AND t.holds_cap = 1 AND t.cap_at > ? AND t.agent_id != ? ORDER BY t.cap_at LIMIT ?`;

type HistoryTuple = [string, bigint | number, string, string | null, string, string, bigint, string, string, bigint | number, string, string, string | null, bigint | number | null];
type HoldingTuple = [bigint | number, bigint | number | null, string, string, string, bigint, bigint | number, bigint | number, bigint | number | null];

/** Both stores read the same columns in the same order (pg/payments.ts). */
export function historyRowOf(r: HistoryTuple): RequestHistoryRow {
  return {
    id: r[0], createdAt: Number(r[1]), status: r[2] as TransactionState, approvalId: r[3], type: r[4], recipient: r[5], amountMicros: BigInt(r[6]),
    serviceSlug: r[7], splitRecipients: splitsOf(r[8]), feeGwei: BigInt(r[9]), request: r[10], reason: r[11], rule: r[12],
    approvalExpiresAt: r[13] === null ? null : Number(r[13]),
  };
}

export function holdingRowOf(r: HoldingTuple): HoldingRow {
  return {
    capAt: Number(r[0]), expiresAt: r[1] === null ? null : Number(r[1]), recipient: r[2], serviceSlug: r[3], splitRecipients: splitsOf(r[4]),
    amountMicros: BigInt(r[5]), feeGwei: BigInt(r[6]), createdAt: Number(r[7]), decidedAt: r[8] === null ? null : Number(r[8]),
  };
}

/**
 * Lets a store on a read connection remember cap sums. `version` names the committed state the
 * next read will see, or is undefined when that cannot be known (the writer has a transaction
 * open): a sum is reused only under the version it was read at, and only while the clock stays
 * inside the span over which no row can leave the window and no approval fall due.
 */
export type CapSumMemo = { version: () => number | undefined };

/** Agents whose sums are remembered at most (then forgotten all at once: a bound on memory, nothing more). */
const CAP_MEMO_AGENTS = 100_000;

export function createPaymentStore(db: Db, memo?: CapSumMemo): Synchronous<PaymentRepository> {
  const capSum = db.prepare(CAP_SUM_SQL).raw(true).safeIntegers(true);
  const limitSql = limitStatesSql('sqlite');
  const limitState = db.prepare(limitSql.state).raw(true).safeIntegers(true);
  const limitScan = db.prepare(limitSql.scan).raw(true).safeIntegers(true);
  const limitOverdue = db.prepare(limitSql.overdue).raw(true).safeIntegers(true);
  const limitOwn = db.prepare(limitSql.own).raw(true).safeIntegers(true);
  const limitInsert = db.prepare(limitSql.insert);
  const limitUpdate = db.prepare(limitSql.update);
  const requestHistory = db.prepare(REQUEST_HISTORY_SQL).raw(true).safeIntegers(true);
  const heldByOthers = db.prepare(HELD_BY_OTHERS_SQL).raw(true).safeIntegers(true);
  const capSumBounded = memo && db.prepare(CAP_SUM_BOUNDED_SQL).raw(true).safeIntegers(true);
  const remembered = new Map<string, { version: number; window: number; from: number; until: number; sum: bigint }>();
  const byKey = db.prepare(`SELECT ${COLUMNS} FROM transactions WHERE agent_id = ? AND idempotency_key = ?`).safeIntegers(true);
  const keylessById = db.prepare(`SELECT ${COLUMNS} FROM transactions WHERE id = ? AND agent_id = ? AND idempotency_key IS NULL AND type != 'ping'`).safeIntegers(true);
  const byId = db.prepare(`SELECT ${COLUMNS} FROM transactions WHERE id = ?`).safeIntegers(true);
  // Positional parameters: binding by name needed the row copied with holdsCap added, a slow
  // object spread in V8, and a name lookup per parameter.
  const insert = db.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, recipient, amount_micros,
    holds_cap, cap_at, reason, service_slug, resource_url, idempotency_key, request_hash, request, result, approval_id, created_at, updated_at, fee_gwei, rule, policy_version, split_recipients)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  // A raw transaction's nonce must still be the row's: see pg/payments.ts SETTLE.
  const settle = db.prepare(move('signing', 'signed', 'result = ?, submit_status = ?, updated_at = ?', 'id = ? AND (? IS NULL OR nonce = ?)'));
  // Submission is a column of a signed row, not a state (migration 0007).
  const submitted = db.prepare(`UPDATE transactions SET submit_status = 'submitted', tx_hash = ?, updated_at = ?
    WHERE id = ? AND status = 'signed' AND submit_status = 'pending'`);
  // Up to the limit per organization, not per chain: one treasury's stuck backlog at low nonces
  // must not keep another treasury's rows (its nonces unrelated) out of every batch.
  // The window numbers only rowids, and the rows it keeps are read after: numbering the whole rows
  // (`SELECT *`, each ~1 KB) sorted every waiting row in memory on the event loop each pass. With
  // 8,144 rows in flight: 17-19 ms and 23 MB more resident memory, against 5.6 ms and none.
  const unsubmitted = db.prepare(`SELECT t.id, t.result FROM (SELECT rowid AS r,
    ROW_NUMBER() OVER (PARTITION BY org_id ORDER BY nonce, id) AS n FROM transactions WHERE submit_status = 'pending' AND chain_id = ?) w
    JOIN transactions t ON t.rowid = w.r WHERE w.n <= ? ORDER BY t.nonce, t.id`);
  // Tracking (migration 0008). Every chain move is guarded by the chain state it leaves, like the
  // status moves, so the tracker and a concurrent broadcast cannot both apply one.
  const submittedAt = db.prepare(`UPDATE transactions SET broadcast_at = ? WHERE id = ? AND submit_status = 'submitted' AND broadcast_at IS NULL`);
  const inFlight = db.prepare(`SELECT t.id, t.org_id, t.agent_id, t.nonce, t.result, t.tx_hash, t.submit_status, t.broadcast_at, t.reason FROM (
    SELECT rowid AS r, ROW_NUMBER() OVER (PARTITION BY org_id ORDER BY nonce, id) AS n FROM transactions
    WHERE submit_status IN ('submitted', 'dropped', 'replaced') AND chain_id = ?) w JOIN transactions t ON t.rowid = w.r
    WHERE w.n <= ? ORDER BY t.nonce, t.id`).safeIntegers(true);
  const attemptsOf = db.prepare(`SELECT hash, kind, serialized, gas, max_fee_per_gas, max_priority_fee_per_gas, created_at
    FROM chain_attempts WHERE transaction_id = ? ORDER BY created_at, rowid`).safeIntegers(true);
  const insertAttempt = db.prepare(`INSERT INTO chain_attempts (transaction_id, hash, kind, serialized, gas, max_fee_per_gas, max_priority_fee_per_gas, created_at)
    SELECT id, ?, ?, ?, ?, ?, ?, ? FROM transactions WHERE id = ? AND status = 'signed' AND submit_status IN ('pending', 'submitted', 'dropped', 'replaced')`);
  const accepted = db.prepare(`UPDATE transactions SET submit_status = ?, tx_hash = ?, broadcast_at = ?, updated_at = ?
    WHERE id = ? AND status = 'signed' AND submit_status IN ('pending', 'submitted', 'dropped', 'replaced')`);
  const dropped = db.prepare(`UPDATE transactions SET submit_status = 'dropped', updated_at = ?
    WHERE id = ? AND status = 'signed' AND submit_status IN ('submitted', 'replaced')`);
  const mined = db.prepare(`UPDATE transactions SET tx_hash = ?, block_number = ?, confirmations = ?, network_fee_wei = ?, updated_at = ?
    WHERE id = ? AND status = 'signed' AND submit_status IN ('submitted', 'dropped', 'replaced')`);
  const confirmed = db.prepare(`UPDATE transactions SET submit_status = 'confirmed', tx_hash = ?, block_number = ?, confirmations = ?, network_fee_wei = ?, updated_at = ?
    WHERE id = ? AND status = 'signed' AND submit_status IN ('submitted', 'dropped', 'replaced')`);
  const reverted = db.prepare(move('signed', 'reverted', `submit_status = 'reverted', tx_hash = ?, block_number = ?, confirmations = ?, network_fee_wei = ?, reason = ?, updated_at = ?`,
    `id = ? AND submit_status IN ('submitted', 'dropped', 'replaced')`));
  const noteReason = db.prepare(`UPDATE transactions SET reason = ?, updated_at = ? WHERE id = ? AND status = 'signed'`);
  const maxSignedNonce = db.prepare(`SELECT MAX(nonce) AS n FROM transactions WHERE org_id = ? AND chain_id = ? AND type = 'raw_transaction' AND status IN ('signed', 'reverted')`);
  // The chain's pending nonce as the counter's floor: released nonces below it are spent on chain.
  const raiseCounter = db.prepare(`INSERT INTO account_nonces (org_id, chain_id, next_nonce) VALUES (?, ?, ?)
    ON CONFLICT (org_id, chain_id) DO UPDATE SET next_nonce = MAX(next_nonce, excluded.next_nonce)`);
  const dropReleasedBelow = db.prepare('DELETE FROM released_nonces WHERE org_id = ? AND chain_id = ? AND nonce < ?');
  const counterOf = db.prepare('SELECT next_nonce FROM account_nonces WHERE org_id = ? AND chain_id = ?');
  const fail = db.prepare(move('signing', 'failed', 'reason = ?, updated_at = ?', 'id = ?'));
  // A nonce goes back to the pool only with the row that held it, in the same transaction as the
  // move out of `signing`: a signed row keeps its nonce forever.
  const releaseNonceOf = db.prepare(`INSERT OR IGNORE INTO released_nonces (org_id, chain_id, nonce)
    SELECT org_id, chain_id, nonce FROM transactions WHERE id = ? AND status = 'signing' AND nonce IS NOT NULL`);
  const releaseInterruptedNonces = db.prepare(`INSERT OR IGNORE INTO released_nonces (org_id, chain_id, nonce)
    SELECT org_id, chain_id, nonce FROM transactions WHERE status = 'signing' AND nonce IS NOT NULL`);
  // An approved payment is spent when it is signed, so its amount counts from then on.
  const approve = db.prepare(move('pending_approval', 'signing', 'cap_at = ?, updated_at = ?', 'id = ?'));
  const markApproved = db.prepare(move('pending_approval', 'approved', 'cap_at = ?, updated_at = ?', 'id = ?'));
  // Collected: the hold starts counting again from now, so the signed payment sits inside the
  // rolling window for a full 24 hours from its signature, however late in its window it was collected.
  const signApproved = db.prepare(move('approved', 'signing', 'request = ?, cap_at = ?, updated_at = ?', 'id = ?'));
  const expireApproved = db.prepare(move('approved', 'expired', 'reason = ?, updated_at = ?', 'id = ? AND cap_at <= ?'));
  const overdueApproved = db.prepare(`SELECT id FROM transactions WHERE status = 'approved' AND cap_at <= ? LIMIT 1000`);
  const denyApproved = db.prepare(move('approved', 'denied', 'reason = ?, updated_at = ?', 'id = ?'));
  const release = {
    denied: db.prepare(move('pending_approval', 'denied', 'reason = ?, updated_at = ?', 'id = ?')),
    expired: db.prepare(move('pending_approval', 'expired', 'reason = ?, updated_at = ?', 'id = ?')),
  };
  // Back from signing to approved, for a row whose approval is approved: the hold stays, the
  // nonce is handed back (before this, by releaseNonceOf), and cap_at returns to the decision time
  // so the collection window still counts from the decision, however often signing is retried.
  const approvedOnly = `approval_id IN (SELECT id FROM approvals WHERE status = 'approved')`;
  const decisionTime = `COALESCE((SELECT a.decided_at FROM approvals a WHERE a.id = transactions.approval_id), cap_at)`;
  const reapprove = db.prepare(move('signing', 'approved', `nonce = NULL, cap_at = ${decisionTime}, updated_at = ?`, `id = ? AND ${approvedOnly}`));
  const reapproveAllSigning = db.prepare(move('signing', 'approved', `nonce = NULL, cap_at = ${decisionTime}, updated_at = ?`, approvedOnly));
  // Rows an older build failed although their approval was approved (a crash while signing).
  const reopenFailed = db.prepare(move('failed', 'approved', `nonce = NULL, cap_at = ${decisionTime}, updated_at = ?`,
    `approval_id IN (SELECT id FROM approvals WHERE status = 'approved' AND decided_at > ?)`));
  const expireFailed = db.prepare(move('failed', 'expired', 'reason = ?, updated_at = ?',
    `approval_id IN (SELECT id FROM approvals WHERE status = 'approved' AND COALESCE(decided_at, 0) <= ?)`));
  const failAllSigning = db.prepare(move('signing', 'failed', `reason = 'Interrupted while signing', updated_at = ?`, 'TRUE'));
  const newest = db.prepare('SELECT MAX(COALESCE(MAX(created_at), 0), COALESCE(MAX(updated_at), 0)) AS t FROM transactions');
  const nextNonce = db.prepare(`INSERT INTO account_nonces (org_id, chain_id, next_nonce) VALUES (?, ?, 1)
    ON CONFLICT (org_id, chain_id) DO UPDATE SET next_nonce = next_nonce + 1 RETURNING next_nonce - 1 AS nonce`);
  const lowestReleased = db.prepare(`DELETE FROM released_nonces WHERE rowid = (
    SELECT rowid FROM released_nonces WHERE org_id = ? AND chain_id = ? ORDER BY nonce LIMIT 1) RETURNING nonce`);
  const recordNonce = db.prepare(`UPDATE transactions SET nonce = ? WHERE id = ? AND status = 'signing'`);

  return {
    /** The newest time the ledger has recorded (epoch ms; 0 when empty): the ledger clock's floor. */
    newestTime(): number {
      return Number((newest.get() as { t: number | bigint }).t);
    },
    /**
     * Sum of what counts against the agent's cap since `since` (epoch ms, finite), by when each
     * began counting: the amounts of its rows holding the cap with cap_at > since, less pending
     * approvals overdue at `now`. Exactly the sum over the rows, from the hourly buckets.
     */
    windowUses(q: WindowsQuery): WindowUse[] {
      // Running sums are kept only by a write (the reader cannot write, and a state written outside
      // the writer's transaction would be a write outside the serialized queue).
      const keep = !db.readonly && db.inTransaction;
      const now = BigInt(q.now);
      const overdue = limitOverdue.all(named([q.orgId, now])) as OverdueRow[];
      return q.windows.map((w) => {
        const key = keyOf(q, w);
        const width = key[3];
        const scan = (from: bigint, to: bigint) => sumsOf(limitScan.get(named(coveredParams(q, w, from, to))) as unknown[]);
        const state = limitState.get(named(key)) as unknown[] | undefined;
        let sums: Sums;
        if (!state) {
          sums = scan(now - width, NO_END);
          if (keep) limitInsert.run(named([...key, now, ...sums]));
        } else {
          const asOf = BigInt(state[5] as bigint);
          sums = sumsOf(state);
          if (now > asOf) sums = minus(sums, scan(asOf - width, now - width));
          else if (now < asOf) sums = plus(sums, scan(now - width, asOf - width));
          if (keep && now !== asOf) limitUpdate.run(named([...key, now, ...sums]));
        }
        sums = minus(sums, overdueIn(overdue, w));
        if (q.excludeId) sums = minus(sums, sumsOf(limitOwn.get(named([...coveredParams(q, w, now - width, NO_END), now, q.excludeId])) as unknown[]));
        return useOf(sums);
      });
    },
    requestHistory(orgId: string, agentId: string, since: number, limit: number): RequestHistoryRow[] {
      return (requestHistory.all(orgId, since, agentId, limit) as HistoryTuple[]).map(historyRowOf);
    },
    heldByOthers(orgId: string, agentId: string, since: number, limit: number): HoldingRow[] {
      return (heldByOthers.all(orgId, since, agentId, limit) as HoldingTuple[]).map(holdingRowOf);
    },
    committedSince(agentId: string, since: number, now: number): bigint {
      const version = memo?.version();
      const window = now - since;
      if (version !== undefined) {
        const r = remembered.get(agentId);
        if (r && r.version === version && r.window === window && r.from <= now && now < r.until) return r.sum;
      }
      const { bucket, end } = capHourOf(since);
      if (version === undefined || !capSumBounded) {
        const [hours, hotHours, indexed, recent, overdue] = capSum.get(agentId, bucket, agentId, bucket, agentId, since, end, since, end, agentId, agentId, now, since) as
          [bigint, bigint, bigint, bigint, bigint];
        return hours + hotHours + indexed + recent - overdue;
      }
      const [hours, hotHours, indexed, recent, overdue, firstRow, firstAbove, firstDue] = capSumBounded.get(
        agentId, bucket, agentId, bucket, agentId, since, end, since, end, agentId, agentId, now, since, agentId, since, agentId, now,
      ) as [bigint, bigint, bigint, bigint, bigint, bigint | null, bigint | null, bigint | null];
      const sum = hours + hotHours + indexed + recent - overdue;
      // A row counts while now < cap_at + window; an approval is subtracted from its deadline on.
      const exit = (capAt: bigint | null) => (capAt === null ? Infinity : Number(capAt) + window);
      const until = Math.min(exit(firstRow), exit(firstAbove), firstDue === null ? Infinity : Number(firstDue));
      if (remembered.size >= CAP_MEMO_AGENTS) remembered.clear();
      remembered.set(agentId, { version, window, from: now, until, sum });
      return sum;
    },
    findByIdempotencyKey(agentId: string, key: string): PaymentRow | undefined {
      const r = byKey.get(agentId, key) as Raw | undefined;
      return r && toRow(r);
    },
    /** A keyless request's row, found by its transaction id (how keyless callers collect results). */
    findKeylessById(agentId: string, id: string): PaymentRow | undefined {
      const r = keylessById.get(id, agentId) as Raw | undefined;
      return r && toRow(r);
    },
    get(id: string): PaymentRow | undefined {
      const r = byId.get(id) as Raw | undefined;
      return r && toRow(r);
    },
    /** A new payment row; it holds the cap exactly when its state does. */
    insert(row: PaymentRow & { status: InitialState }): void {
      insert.run(row.id, row.orgId, row.agentId, row.type, row.status, row.chainId, row.recipient, row.amountMicros, holdsCap(row.status) ? 1 : 0,
        row.createdAt, row.reason, row.serviceSlug, row.resourceUrl, row.idempotencyKey, row.requestHash, row.request, row.result, row.approvalId,
        row.createdAt, row.createdAt, row.feeGwei ?? 0n, row.rule ?? null, row.policyVersion ?? null, splitsText(row.splitRecipients));
    },
    /** Records the signature; `submit` marks a raw transaction for broadcast (its chain has an RPC endpoint). */
    settleSigned(id: string, result: string, now: number, submit = false, nonce?: number): boolean {
      return settle.run(result, submit ? 'pending' : null, now, id, nonce ?? null, nonce ?? null).changes === 1;
    },
    /** A node accepted the row's transaction: record its hash. False when it was already recorded. */
    markSubmitted(id: string, txHash: string, now: number): boolean {
      return submitted.run(txHash, now, id).changes === 1;
    },
    /** Signed raw transactions of `chainId` waiting for broadcast, lowest nonce first; at most `limit` per organization. */
    unsubmitted(chainId: number, limit: number): Array<{ id: string; result: string }> {
      return unsubmitted.all(chainId, limit) as Array<{ id: string; result: string }>;
    },
    /** Starts the fee-bump timer of a row that markSubmitted just moved (same write). */
    startBroadcastTimer(id: string, now: number): void {
      submittedAt.run(now, id);
    },
    /** Submitted raw transactions of `chainId` not yet final (submitted, dropped, replaced), lowest nonce first; at most `limit` per organization. */
    inFlight(chainId: number, limit: number): InFlightRow[] {
      return (inFlight.all(chainId, limit) as Array<Record<string, unknown>>).map((r) => ({
        id: r.id as string, orgId: r.org_id as string, agentId: r.agent_id as string, nonce: Number(r.nonce), result: r.result as string,
        txHash: r.tx_hash as string | null, submitStatus: r.submit_status as InFlightRow['submitStatus'],
        broadcastAt: r.broadcast_at === null ? null : Number(r.broadcast_at), reason: r.reason as string,
      }));
    },
    /** The versions of a row after its original, oldest first. */
    attempts(id: string): ChainAttempt[] {
      return (attemptsOf.all(id) as Array<Record<string, unknown>>).map((r) => ({
        hash: r.hash as string, kind: r.kind as ChainAttempt['kind'], serialized: r.serialized as string, gas: BigInt(r.gas as string),
        maxFeePerGas: BigInt(r.max_fee_per_gas as string), maxPriorityFeePerGas: BigInt(r.max_priority_fee_per_gas as string), createdAt: Number(r.created_at),
      }));
    },
    /** Records a new version of a tracked row before it is broadcast. False when the row is final. */
    addAttempt(id: string, a: ChainAttempt): boolean {
      return insertAttempt.run(a.hash, a.kind, a.serialized, a.gas.toString(), a.maxFeePerGas.toString(), a.maxPriorityFeePerGas.toString(), a.createdAt, id).changes === 1;
    },
    /** A node accepted version `hash` of the row: submitted (the original) or replaced (a later version). */
    markAccepted(id: string, hash: string, replacement: boolean, now: number): boolean {
      return accepted.run(replacement ? 'replaced' : 'submitted', hash, now, now, id).changes === 1;
    },
    /** The node no longer knows any version and none is mined. */
    markDropped(id: string, now: number): boolean {
      return dropped.run(now, id).changes === 1;
    },
    /** A version is mined but not yet confirmed enough: record where. */
    markMined(id: string, m: MinedVersion, now: number): boolean {
      return mined.run(m.hash, m.blockNumber, m.confirmations, m.networkFeeWei, now, id).changes === 1;
    },
    markConfirmed(id: string, m: MinedVersion, now: number): boolean {
      return confirmed.run(m.hash, m.blockNumber, m.confirmations, m.networkFeeWei, now, id).changes === 1;
    },
    /** Final: nothing was paid (the receipt failed, or a filler used the nonce); releases the hold. */
    markReverted(id: string, m: MinedVersion, reason: string, now: number): boolean {
      return reverted.run(m.hash, m.blockNumber, m.confirmations, m.networkFeeWei, reason, now, id).changes === 1;
    },
    /** Notes why a signed row is not moving (a refusal, a bump over the ceiling) in its reason. */
    noteReason(id: string, reason: string, now: number): void {
      noteReason.run(reason, now, id);
    },
    /** The highest nonce a signed (or reverted) raw transaction of (treasury, chain) holds; undefined when none. */
    maxSignedNonce(orgId: string, chainId: number): number | undefined {
      const n = (maxSignedNonce.get(orgId, chainId) as { n: number | bigint | null }).n;
      return n === null ? undefined : Number(n);
    },
    /**
     * Raises the (treasury, chain) counter to `floor` (the node's pending nonce) when it is lower,
     * and forgets released nonces below it (the chain has used them). Inside a write transaction.
     */
    /** The next new nonce of (treasury, chain): 0 before the first reservation. */
    nonceCounter(orgId: string, chainId: number): number {
      return Number((counterOf.get(orgId, chainId) as { next_nonce: number | bigint } | undefined)?.next_nonce ?? 0);
    },
    raiseNonceFloor(orgId: string, chainId: number, floor: number): void {
      raiseCounter.run(orgId, chainId, floor);
      dropReleasedBelow.run(orgId, chainId, floor);
    },
    /** Ends a `signing` row without a signature: releases its hold and hands its nonce back. */
    markFailed(id: string, reason: string, now: number): boolean {
      releaseNonceOf.run(id);
      return fail.run(reason, now, id).changes === 1;
    },
    /**
     * Ends a `signing` row that will not be signed now (signing failed, or recording it failed):
     * a row whose approval is approved goes back to `approved` and keeps its hold (the agent's
     * repeat collects it again), any other row becomes `failed` and releases its hold. Either way
     * its nonce is handed back. Undefined when the row was no longer signing.
     */
    releaseSigning(id: string, reason: string, now: number): 'approved' | 'failed' | undefined {
      releaseNonceOf.run(id);
      if (reapprove.run(now, id).changes === 1) return 'approved';
      return fail.run(reason, now, id).changes === 1 ? 'failed' : undefined;
    },
    startSigningApproved(id: string, now: number): boolean {
      return approve.run(now, now, id).changes === 1;
    },
    /** An approved paywall payment: it keeps its hold and is signed when the agent collects it. */
    markApproved(id: string, now: number): boolean {
      return markApproved.run(now, now, id).changes === 1;
    },
    /** Starts signing an approved paywall payment against the fresh challenge stored in `request`. */
    startSigningFromApproved(id: string, request: string, now: number): boolean {
      return signApproved.run(request, now, now, id).changes === 1;
    },
    /** Expires an approved paywall payment decided at or before `decidedBy` and releases its hold. */
    expireApproved(id: string, decidedBy: number, reason: string, now: number): boolean {
      return expireApproved.run(reason, now, id, decidedBy).changes === 1;
    },
    /** Approved paywall payments decided at or before `decidedBy` (uncollected past their window). */
    overdueApproved(decidedBy: number): string[] {
      return (overdueApproved.all(decidedBy) as { id: string }[]).map((r) => r.id);
    },
    denyApproved(id: string, reason: string, now: number): boolean {
      return denyApproved.run(reason, now, id).changes === 1;
    },
    /** Ends a pending row as denied or expired and releases its hold on the cap. */
    releasePending(id: string, status: 'denied' | 'expired', reason: string, now: number): boolean {
      return release[status].run(reason, now, id).changes === 1;
    },
    /**
     * At start-up, rows left in `signing` whose approval is approved go back to `approved`: the
     * crash must not consume the approval. Call before failInterrupted.
     */
    reapproveInterrupted(now: number): number {
      releaseInterruptedNonces.run();
      return reapproveAllSigning.run(now).changes;
    },
    /**
     * Repairs rows an older build marked `failed` although their approval was approved: decided
     * after `decidedAfter` they are `approved` again (holding the cap, collectable); older ones are
     * `expired` with `expiredReason`.
     */
    reopenFailedApprovals(decidedAfter: number, expiredReason: string, now: number): { reopened: number; expired: number } {
      return { reopened: reopenFailed.run(now, decidedAfter).changes, expired: expireFailed.run(expiredReason, now, decidedAfter).changes };
    },
    /** At start-up nothing can still be signing: those rows were cut off by a crash. */
    failInterrupted(now: number): number {
      releaseInterruptedNonces.run();
      return failAllSigning.run(now).changes;
    },
    /**
     * Reserves an account nonce of (treasury, chain) for the `signing` row `rowId` and records it
     * there: the lowest nonce a failed reservation handed back, else the next new one. A nonce is
     * held by at most one row at a time and, once signed, never handed out again, so the signed
     * nonces stay gap-free. Call inside the write transaction that put the row into `signing`.
     */
    allocateNonce(orgId: string, chainId: number, rowId: string): number {
      const reused = lowestReleased.get(orgId, chainId) as { nonce: number | bigint } | undefined;
      const nonce = Number(reused?.nonce ?? (nextNonce.get(orgId, chainId) as { nonce: number | bigint }).nonce);
      if (recordNonce.run(nonce, rowId).changes !== 1) throw new Error(`no signing row ${rowId} to hold nonce ${nonce}`);
      return nonce;
    },
  };
}
export type PaymentStore = ReturnType<typeof createPaymentStore>;

/**
 * The cap bucket `since` falls in and where it ends: rows after `since` are those of the later
 * buckets, whole, and those of this one with cap_at in (since, end). Floored like the buckets.
 */
export function capHourOf(since: number): { bucket: number; end: number } {
  const bucket = Math.floor(since / CAP_BUCKET_MS);
  return { bucket, end: (bucket + 1) * CAP_BUCKET_MS };
}
