import type { SpendLimit } from '../domain/limits.js';
import type { RegistryIndex } from '../domain/indexRegistry.js';
import type { InitialState, TransactionState } from '../domain/transactionState.js';
import type {
  Agent, ApiKeyRecord, PolicyVersion, ChainState, DashboardUser, Organization, Policy, RegisteredService, ServiceRecord, ServiceSummary,
  TransactionRecord,
} from '../domain/types.js';
import type { AgentStatus } from '../domain/validate.js';

/**
 * The store port: everything the use cases ask of storage, as plain interfaces over domain types.
 * Two stores implement it and the compiler checks each: SQLite (./store.ts, ./unitOfWork.ts: one
 * writer connection, group commit, an fdatasync of the WAL) and PostgreSQL (./pg/: SERIALIZABLE
 * transactions on a pool, shared by replicas). A use case holds `AppStore` as `deps.store` and a
 * `UnitOfWork` as `deps.uow`, and never learns which store it runs on.
 *
 * Atomicity rule (what `UnitOfWork.write(fn)` promises):
 * - What a write sees: `fn(tx)` reads and writes only through `tx`, which sees everything
 *   committed before it and its own writes, and nothing of any write still open. Reads outside a
 *   write (`deps.store`) see committed data only, never another request's open transaction.
 * - What commits together: every change `fn` makes through `tx` commits as one transaction, or
 *   none of it does. Writes are serialized (SQLite: one at a time on the writer; PostgreSQL:
 *   SERIALIZABLE, so replicas' writes behave as if run one at a time): the cap check's read, compare
 *   and insert cannot interleave with another payment's.
 * - When it resolves: only once the commit is durable (synced to disk), so no answer runs ahead of
 *   the disk.
 * - On failure: when `fn` throws, nothing of it is written and the promise rejects with its error.
 *   A commit that fails rejects every write it carried; after a failed sync SQLite refuses every
 *   further write (fail-stop). `fn` may run more than once (PostgreSQL retries a serialization
 *   failure on a fresh snapshot), so it has no effect outside `tx`.
 * - Errors: each store maps its driver's errors to DomainError before they leave it, so no use
 *   case knows a driver. Storage full is `overloaded`/`storage_full`; a database that does not
 *   answer is `overloaded`/`database_unavailable`; a write that kept losing races is
 *   `overloaded`/`database_busy`, with nothing written. A payment insert that loses a race for its
 *   (agent, Idempotency-Key) to another replica's insert rolls the whole write back and rejects
 *   with `conflict`/IDEMPOTENCY_KEY_TAKEN (domain/errors.ts): the caller reads and answers the
 *   winner's row. One SQLite process never races there.
 */

/** Organizations and their treasuries (the sealed key is read only by the vault). */
export interface OrganizationRepository {
  insert(org: Omit<Organization, 'treasuryAddress' | 'limits'>): Promise<void>;
  get(id: string): Promise<Organization | undefined>;
  update(id: string, name: string, approvalWindowSeconds: number): Promise<void>;
  /** Replaces the organization's window limits. */
  setLimits(id: string, limits: readonly SpendLimit[]): Promise<void>;
  list(): Promise<Organization[]>;
  insertTreasury(orgId: string, address: string, ciphertext: Buffer, now: number): Promise<void>;
  treasuryKey(orgId: string): Promise<{ address: string; ciphertext: Buffer } | undefined>;
}

/** API keys, stored only as SHA-256 hashes of the plaintext; a revocation is seen by the very next request. */
export interface ApiKeyRepository {
  insert(key: ApiKeyRecord, hash: Buffer): Promise<void>;
  findByHash(hash: Buffer): Promise<(ApiKeyRecord & { hash: Buffer }) | undefined>;
  get(id: string): Promise<ApiKeyRecord | undefined>;
  /**
   * The key row for a write that acts on the key being valid (deciding or collecting a payment),
   * held against a concurrent revoke until the write commits.
   */
  getForUse(id: string): Promise<ApiKeyRecord | undefined>;
  listByOrg(orgId: string): Promise<ApiKeyRecord[]>;
  revoke(id: string, now: number): Promise<void>;
}

/** Who an agent is, without its policy. */
export type AgentIdentity = Pick<Agent, 'id' | 'orgId' | 'name' | 'status' | 'lastPingAt'>;

/** Agents and their policies; an agent always has exactly one policy. Callers treat records as read-only. */
export interface AgentRepository {
  insert(agent: Agent, actor?: string): Promise<void>;
  get(id: string): Promise<Agent | undefined>;
  /**
   * The agent and policy a write decides on (a payment, an approval, a collection, a fee bump),
   * held against a concurrent pause or policy change until the write commits.
   */
  getForUse(id: string): Promise<Agent | undefined>;
  /** The agent without its policy, for a write that decides nothing on the policy (a ping). */
  getIdentity(id: string): Promise<AgentIdentity | undefined>;
  listByOrg(orgId: string): Promise<Agent[]>;
  update(id: string, name: string, status: AgentStatus, now: number): Promise<void>;
  /**
   * Replaces the agent's policy with a new version, numbered one above the last, kept in its
   * history with `actor` (who made it); `insert` makes version 1 the same way.
   */
  setPolicy(agentId: string, policy: Policy, actor?: string): Promise<void>;
  touchPing(id: string, now: number): Promise<void>;
  /** Every version of the agent's policy, oldest first. */
  policyVersions(agentId: string): Promise<PolicyVersion[]>;
}

/** Records, base URLs (payment methods with a base URL) and stored bytes of one organization's own records, for its limits. */
export type RegistryUsage = { records: number; baseUrls: number; bytes: number };

/**
 * The service registry. A record is shared (`orgId` null, the operator's) or private to one
 * organization; a slug names at most one record in what an organization sees.
 */
export interface ServiceRepository {
  /** Inserts or replaces by slug within one scope (`orgId` null: shared); an existing record keeps its id. */
  upsert(s: ServiceRecord, orgId: string | null, now: number): Promise<RegisteredService>;
  /** The record with this slug in exactly one scope (`orgId` null: shared). */
  get(slug: string, orgId: string | null): Promise<RegisteredService | undefined>;
  /** The whole records of exactly one scope with slugs from `first` to `last`, by slug: a page of `summaries`. */
  range(orgId: string | null, first: string, last: string): Promise<RegisteredService[]>;
  /** The summaries of exactly one scope (`orgId` null: shared), by slug. */
  summaries(orgId: string | null): Promise<readonly ServiceSummary[]>;
  /** What one organization's agents see: every shared record, then the organization's own, each by slug. */
  visibleSummaries(orgId: string): Promise<readonly ServiceSummary[]>;
  /** The index of what `visibleSummaries` lists, for attribution. */
  visibleIndex(orgId: string): Promise<RegistryIndex>;
  /** How many records, base URLs and stored bytes one organization holds privately, as this transaction sees it. */
  usage(orgId: string): Promise<RegistryUsage>;
  /** The stored bytes of the records these slugs name in what one organization sees, together. */
  visibleBytes(orgId: string, slugs: readonly string[]): Promise<number>;
  /** Organizations holding a private record with this slug. */
  privateHolders(slug: string): Promise<string[]>;
  /** Deletes the record with this slug in exactly one scope; false when there was none. */
  delete(slug: string, orgId: string | null): Promise<boolean>;
}

export type TransactionFilter = {
  orgId: string;
  agentId?: string;
  status?: string;
  from?: number;
  to?: number;
  /** Keyset cursor: rows strictly older than (createdAt, id). */
  before?: { createdAt: number; id: string };
  limit: number;
};

/** The ledger as listed: every payment request, decision and ping. */
export interface TransactionRepository {
  /** Whether the agent has a ping row created in (after, upTo]. */
  hasPingBetween(orgId: string, agentId: string, after: number, upTo: number): Promise<boolean>;
  /** A new ledger row (a ping); it holds the cap exactly when its state does. */
  insert(tx: TransactionRecord & { status: InitialState }): Promise<void>;
  /** One page, newest first. */
  list(f: TransactionFilter): Promise<TransactionRecord[]>;
}

/** A past payment request of an agent, as a policy simulation replays it (domain/simulation.ts). */
export type RequestHistoryRow = {
  id: string; createdAt: number; status: TransactionState; approvalId: string | null; type: string; recipient: string; amountMicros: bigint;
  serviceSlug: string; splitRecipients: string[]; feeGwei: bigint; request: string; reason: string; rule: string | null;
  /** When its approval expires (or expired); null for a request that never waited for one. */
  approvalExpiresAt: number | null;
};

/**
 * A payment holding its organization's windows now: from `capAt`, until `expiresAt` for a pending
 * approval (null: for good). An approved one (`decidedAt` set) also held from `createdAt` until the
 * decision, while it waited: approval moves a hold's start to the decision.
 */
export type HoldingRow = {
  capAt: number; expiresAt: number | null; recipient: string; serviceSlug: string; splitRecipients: string[]; amountMicros: bigint; feeGwei: bigint;
  createdAt: number; decidedAt: number | null;
};

/** One window to measure: the organization's holding rows after `since`, narrowed to an agent and to a recipient when they are set. */
export type WindowSpec = { agentId: string | null; recipient: string | null; since: number };
export type WindowsQuery = { orgId: string; now: number; excludeId?: string | null; windows: readonly WindowSpec[] };
export type WindowUse = { micros: bigint; count: number; feeGwei: bigint };

export type PaymentRow = TransactionRecord & {
  resourceUrl: string;
  idempotencyKey: string | null;
  requestHash: string;
  /** JSON of the normalized request, needed to sign after an approval. */
  request: string;
  /** JSON of the signed result, replayed to idempotent repeats. */
  result: string | null;
  /** The hash a node accepted (raw transactions submitted by the service). */
  txHash?: string | null;
  /** Where the submitted raw transaction is on chain; null when the service does not submit it. */
  submitStatus?: ChainState | null;
  /** The most network fee the treasury may pay for it, in whole gwei rounded up (0 without one); written on insert. */
  feeGwei?: bigint;
  /** JSON of the rule that decided a denial or an approval request (domain/policy.ts RuleInfo); null otherwise. */
  rule?: string | null;
  /** The version of the agent's policy that decided it. */
  policyVersion?: number | null;
  /** The other lowercased addresses the payment pays (an MPP split); written on insert. */
  splitRecipients?: readonly string[];
};

/** A submitted raw transaction the tracker follows (app/submission/submit.ts). */
export type InFlightRow = {
  id: string; orgId: string; agentId: string; nonce: number; result: string; txHash: string | null;
  submitStatus: 'submitted' | 'dropped' | 'replaced'; broadcastAt: number | null; reason: string;
};

/** A version of a raw transaction after the original (a fee bump or a nonce filler). */
export type ChainAttempt = {
  hash: string; kind: 'bump' | 'filler'; serialized: string; gas: bigint; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint; createdAt: number;
};

/** A mined version of a tracked row (all null but the hash for a row whose nonce someone else used). */
export type MinedVersion = { hash: string; blockNumber: number | null; confirmations: number | null; networkFeeWei: string | null };

/**
 * Payment rows along the state machine of domain/transactionState.ts. Every state change is
 * guarded by the state it leaves, so a transition happens once whoever races for it, and returns
 * whether it did. A row whose approval is `approved` never becomes `failed`.
 */
export interface PaymentRepository {
  /** The newest time the ledger has recorded (epoch ms; 0 when empty): the ledger clock's floor. */
  newestTime(): Promise<number>;
  /**
   * Sum of what counts against the agent's cap since `since` (epoch ms, finite): the amounts of its
   * rows holding the cap with cap_at > since, less pending approvals overdue at `now`.
   */
  committedSince(agentId: string, since: number, now: number): Promise<bigint>;
  /**
   * What each window of a decision's limits holds (domain/limits.ts): the amounts, the number and the network fees (whole gwei, rounded up)
   * of its rows holding the cap with cap_at > the window's `since`, only the agent's when
   * `agentId` is set, only those paying `recipient` (a lowercased address, as the recipient or a
   * split's; or the registry slug the payment was attributed to) when it is set; less pending
   * approvals overdue at `now`, as committedSince; and less the row `excludeId` (a payment being
   * re-checked). Sums are exact however large: no window's total can overflow the store's integers.
   */
  windowUses(q: WindowsQuery): Promise<WindowUse[]>;
  /** An agent's payment requests (pings left out) made at or after `since`, oldest first (by time, then id); at most `limit`. */
  requestHistory(orgId: string, agentId: string, since: number, limit: number): Promise<RequestHistoryRow[]>;
  /** The organization's rows of every agent but `agentId` that hold its windows now, held since after `since`, oldest hold first; at most `limit`. */
  heldByOthers(orgId: string, agentId: string, since: number, limit: number): Promise<HoldingRow[]>;
  findByIdempotencyKey(agentId: string, key: string): Promise<PaymentRow | undefined>;
  /** A keyless request's row, found by its transaction id (how keyless callers collect results). */
  findKeylessById(agentId: string, id: string): Promise<PaymentRow | undefined>;
  get(id: string): Promise<PaymentRow | undefined>;
  /** A new payment row; it holds the cap exactly when its state does. */
  insert(row: PaymentRow & { status: InitialState }): Promise<void>;
  /** Records the signature; `submit` marks a raw transaction for broadcast; a given `nonce` must still be the row's. */
  settleSigned(id: string, result: string, now: number, submit?: boolean, nonce?: number): Promise<boolean>;
  /** A node accepted the row's transaction: record its hash. False when it was already recorded. */
  markSubmitted(id: string, txHash: string, now: number): Promise<boolean>;
  /** Signed raw transactions of `chainId` waiting for broadcast, lowest nonce first; at most `limit` per organization. */
  unsubmitted(chainId: number, limit: number): Promise<Array<{ id: string; result: string }>>;
  /** Starts the fee-bump timer of a row that markSubmitted just moved (same write). */
  startBroadcastTimer(id: string, now: number): Promise<void>;
  /** Submitted raw transactions of `chainId` not yet final, lowest nonce first; at most `limit` per organization. */
  inFlight(chainId: number, limit: number): Promise<InFlightRow[]>;
  /** The versions of a row after its original, oldest first. */
  attempts(id: string): Promise<ChainAttempt[]>;
  /** Records a new version of a tracked row before it is broadcast. False when the row is final. */
  addAttempt(id: string, a: ChainAttempt): Promise<boolean>;
  /** A node accepted version `hash` of the row: submitted (the original) or replaced (a later version). */
  markAccepted(id: string, hash: string, replacement: boolean, now: number): Promise<boolean>;
  /** The node no longer knows any version and none is mined. */
  markDropped(id: string, now: number): Promise<boolean>;
  /** A version is mined but not yet confirmed enough: record where. */
  markMined(id: string, m: MinedVersion, now: number): Promise<boolean>;
  markConfirmed(id: string, m: MinedVersion, now: number): Promise<boolean>;
  /** Final: nothing was paid (the receipt failed, or a filler used the nonce); releases the hold. */
  markReverted(id: string, m: MinedVersion, reason: string, now: number): Promise<boolean>;
  /** Notes why a signed row is not moving (a refusal, a bump over the ceiling) in its reason. */
  noteReason(id: string, reason: string, now: number): Promise<void>;
  /** The highest nonce a signed (or reverted) raw transaction of (treasury, chain) holds; undefined when none. */
  maxSignedNonce(orgId: string, chainId: number): Promise<number | undefined>;
  /** The next new nonce of (treasury, chain): 0 before the first reservation. */
  nonceCounter(orgId: string, chainId: number): Promise<number>;
  /**
   * Raises the (treasury, chain) counter to `floor` (the node's pending nonce) when it is lower,
   * and forgets released nonces below it (the chain has used them). Inside a write.
   */
  raiseNonceFloor(orgId: string, chainId: number, floor: number): Promise<void>;
  /** Ends a `signing` row without a signature: releases its hold and hands its nonce back. */
  markFailed(id: string, reason: string, now: number): Promise<boolean>;
  /**
   * Ends a `signing` row that will not be signed now: a row whose approval is approved goes back
   * to `approved` and keeps its hold, any other becomes `failed`. Either way its nonce is handed
   * back. Undefined when the row was no longer signing.
   */
  releaseSigning(id: string, reason: string, now: number): Promise<'approved' | 'failed' | undefined>;
  startSigningApproved(id: string, now: number): Promise<boolean>;
  /** An approved paywall payment: it keeps its hold and is signed when the agent collects it. */
  markApproved(id: string, now: number): Promise<boolean>;
  /** Starts signing an approved paywall payment against the fresh challenge stored in `request`. */
  startSigningFromApproved(id: string, request: string, now: number): Promise<boolean>;
  /** Expires an approved paywall payment decided at or before `decidedBy` and releases its hold. */
  expireApproved(id: string, decidedBy: number, reason: string, now: number): Promise<boolean>;
  /** Approved paywall payments decided at or before `decidedBy` (uncollected past their window). */
  overdueApproved(decidedBy: number): Promise<string[]>;
  denyApproved(id: string, reason: string, now: number): Promise<boolean>;
  /** Ends a pending row as denied or expired and releases its hold on the cap. */
  releasePending(id: string, status: 'denied' | 'expired', reason: string, now: number): Promise<boolean>;
  /** At start-up, rows left in `signing` whose approval is approved go back to `approved`. Call before failInterrupted. */
  reapproveInterrupted(now: number): Promise<number>;
  /**
   * Repairs rows marked `failed` although their approval was approved: decided after
   * `decidedAfter` they are `approved` again; older ones are `expired` with `expiredReason`.
   */
  reopenFailedApprovals(decidedAfter: number, expiredReason: string, now: number): Promise<{ reopened: number; expired: number }>;
  /** At start-up nothing can still be signing: those rows were cut off by a crash. */
  failInterrupted(now: number): Promise<number>;
  /**
   * Reserves an account nonce of (treasury, chain) for the `signing` row `rowId` and records it
   * there: the lowest nonce handed back, else the next new one, so signed nonces stay gap-free.
   * Inside the write that put the row into `signing`.
   */
  allocateNonce(orgId: string, chainId: number, rowId: string): Promise<number>;
}

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired';

export type ApprovalRow = {
  id: string;
  orgId: string;
  agentId: string;
  transactionId: string;
  status: ApprovalStatus;
  createdAt: number;
  expiresAt: number;
  decidedAt: number | null;
  decidedBy: string;
  note: string;
};

/** Approval requests. Decisions are guarded by `status = 'pending'` so each happens once. */
export interface ApprovalRepository {
  insert(a: ApprovalRow): Promise<void>;
  get(id: string): Promise<ApprovalRow | undefined>;
  listByOrg(orgId: string, status?: string): Promise<ApprovalRow[]>;
  decide(id: string, status: 'approved' | 'denied', now: number, by: string, note: string): Promise<boolean>;
  /** Approval requests waiting for a human right now. */
  countPending(): Promise<number>;
  /** Calls `listener` for each decision recorded, with how long the request waited (metrics). One listener. */
  onDecided(listener: (status: 'approved' | 'denied', waitedMs: number) => void): Promise<void>;
  expire(id: string): Promise<boolean>;
  /** Pending approvals whose window has closed, one sweep batch. */
  due(now: number): Promise<ApprovalRow[]>;
}

/** Small key-value table for process-wide facts such as the admin token hash. */
export interface SettingsRepository {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string): Promise<void>;
}

/** What counts against an agent's cap, per time bucket: exactly what the policy sees. */
export interface SpendRepository {
  /** Micro-USD per bucket of `sizeMs` since `since`; index k of the result is bucket k, `count` buckets. */
  bucketsSince(agentId: string, since: number, sizeMs: number, count: number): Promise<bigint[]>;
}

/** What a password check needs; read only by the sign-in use case. */
export type PasswordRecord = { salt: Buffer; hash: Buffer; params: string };

/** Dashboard users. Emails are stored lower-cased, so uniqueness ignores case. */
export interface DashboardUserRepository {
  insert(user: DashboardUser, password: PasswordRecord): Promise<void>;
  /** The user and their password record, for sign-in only. */
  findForSignIn(email: string): Promise<{ user: DashboardUser; password: PasswordRecord } | undefined>;
  getByEmail(email: string): Promise<DashboardUser | undefined>;
  get(id: string): Promise<DashboardUser | undefined>;
  listByOrg(orgId: string): Promise<DashboardUser[]>;
  /** How many owners of an organization may still sign in. */
  countEnabledOwners(orgId: string): Promise<number>;
  setDisabled(id: string, disabled: boolean): Promise<void>;
  setPassword(id: string, password: PasswordRecord): Promise<void>;
  /** Removes the user row; the caller deletes their sessions first (they reference it). */
  delete(id: string): Promise<boolean>;
}

export type DashboardSession = {
  /** SHA-256 of the cookie's token; the token itself is never stored. */
  tokenHash: Buffer;
  userId: string;
  csrfToken: string;
  createdAt: number;
  expiresAt: number;
};

/** Dashboard sign-in sessions, keyed by the hash of their token. */
export interface DashboardSessionRepository {
  insert(s: DashboardSession): Promise<void>;
  get(tokenHash: Buffer): Promise<DashboardSession | undefined>;
  delete(tokenHash: Buffer): Promise<boolean>;
  deleteExpired(now: number): Promise<number>;
  deleteByUser(userId: string): Promise<number>;
}

export type LoginFailures = { email: string; failures: number; windowStart: number; lockedUntil: number };

/** Recent failed dashboard sign-ins, one row per email and one per client address (`address <ip>`). */
export interface LoginFailureRepository {
  get(email: string): Promise<LoginFailures | undefined>;
  put(f: LoginFailures): Promise<void>;
  clear(email: string): Promise<void>;
  /**
   * Drops rows that can no longer affect a decision; then, if more than `maxRows` remain, the
   * unlocked rows with the oldest windows until `maxRows` do.
   */
  prune(windowStartBefore: number, now: number, maxRows?: number): Promise<number>;
}

/** The ledger's side of a treasury's funds on one chain. */
export interface TreasuryFundsRepository {
  /** Raw transactions of (treasury, chain) holding a nonce ≥ `minedNonce` and signed or being signed: amount and stored request. */
  unminedRaw(orgId: string, chainId: number, minedNonce: number): Promise<Array<{ amountMicros: bigint; request: string }>>;
}

/** Every repository, bound to one connection: committed data (`deps.store`) or one write's transaction (`tx`). */
export interface StoreTables {
  organizations: OrganizationRepository;
  apiKeys: ApiKeyRepository;
  agents: AgentRepository;
  services: ServiceRepository;
  transactions: TransactionRepository;
  payments: PaymentRepository;
  approvals: ApprovalRepository;
  settings: SettingsRepository;
  spend: SpendRepository;
  dashboardUsers: DashboardUserRepository;
  dashboardSessions: DashboardSessionRepository;
  loginFailures: LoginFailureRepository;
  treasuryFunds: TreasuryFundsRepository;
}

/**
 * What the use cases hold as `deps.store`: the repositories for reads outside a write (committed
 * data only), plus the store's health. Writes, and reads a write depends on, go through the unit
 * of work and its `tx`.
 */
export interface AppStore extends StoreTables {
  /** The error that stopped the store (fail-stop after a failed sync), if any. */
  failure(): Error | undefined;
  /** Runs once, on the first failed sync or I/O error under a commit. */
  onFailure(listener: (err: Error) => void): void;
  /** Seconds each durable sync took (one listener; the metrics histogram). A store without one never calls it. */
  onWalSync(listener: (seconds: number) => void): void;
  /** False once the store is closed (metrics stop reading it). */
  isOpen(): boolean;
  /** The database file (readiness checks its disk). */
  dataFile(): string;
  /** A store behind a network: whether the database answered its last ping; readiness uses it instead of dataFile. */
  database?(): { ok: boolean; detail: string };
}

/** How one write is committed. */
export type WriteOptions = {
  /**
   * Commit in a transaction of its own, durable when its COMMIT returns, never waiting on a shared
   * sync. For admin, dashboard, sign-in and upkeep writes; hot paths group. A store whose every
   * commit is durable on its own ignores it.
   */
  alone?: boolean;
};

/**
 * The use cases' one transaction interface, under the atomicity rule above. Every read and write
 * of `fn` goes through `tx` and `fn` awaits nothing but `tx`; a write never opens another write
 * (it would wait for itself): helpers a write calls take its `tx`.
 */
export interface UnitOfWork {
  /** Runs `fn(tx)` as one atomic, serialized, durable transaction; `fn` may run more than once. */
  write<T>(fn: (tx: StoreTables) => Promise<T>, options?: WriteOptions): Promise<T>;
  /** Runs `fn(tx)` against one consistent snapshot of committed data; `fn` must not write. */
  read<T>(fn: (tx: StoreTables) => Promise<T>): Promise<T>;
  /** Resolves once everything committed before the call is durable (a replayed read of another request's row waits for it). */
  durable(): Promise<void>;
}
