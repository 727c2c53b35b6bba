import { createHash } from 'node:crypto';
import { getAddress, type Address } from 'viem';
import { DomainError, invalidArgument } from '../domain/errors.js';
import type { NetworkFee } from '../domain/networkFee.js';
import { evaluatePolicy, type Verdict } from '../domain/policy.js';
import { canonicalRequest, parsePaymentRequest, type PaymentRequest, type PaymentRequestInput, type PaymentType } from '../domain/paymentRequest.js';
import type { Agent, ApiKeyPrincipal } from '../domain/types.js';
import { writeTxn } from '../store/db.js';
import { newUuid } from '../store/ids.js';
import type { PaymentRow } from '../store/payments.js';
import { requireAgentInOrg } from './agents.js';
import { expireCollectionIfDue, expireIfDue, recheckApproved } from './approvals.js';
import type { AppDeps } from './deps.js';
import { storeRequest, type SignedPayment } from './signedPayment.js';
import { isPaywallRequest, preparePayment, storedMppOffer, type StoredPaywallRequest } from './preparePayment.js';
import { attributeOffer, offerFromJson, offerToJson, probeOffer, requireOfferChain, sameOffer, splitRecipients } from './paywall.js';
import { checkUrl } from '../probe/safeFetch.js';
import type { Offer } from '../probe/offer.js';

/** The rolling window of the spend cap. */
export const CAP_WINDOW_MS = 24 * 3600 * 1000;

export type SignResult =
  | {
      outcome: 'allowed'; agentId: string; transactionId: string; idempotent: boolean; amountMicros: bigint;
      chainId: number; type: PaymentType; recipient: string; signed: SignedPayment; resourceUrl: string;
    }
  | { outcome: 'pending_approval'; agentId: string; transactionId: string; approvalRequestId: string; reason: string; idempotent: boolean }
  | { outcome: 'denied'; agentId: string; transactionId: string; reason: string; idempotent: boolean }
  | { outcome: 'dry_run'; agentId: string; verdict: Verdict; type: PaymentType; chainId: number; recipient: string; amountMicros: bigint };

function treasuryOf(deps: AppDeps, orgId: string): Address {
  const address = deps.vault.address(orgId);
  if (!address) throw new DomainError('treasury_unavailable', 'Organization treasury not provisioned', { code: 'treasury_not_provisioned' });
  return address as Address;
}

/**
 * Policy facts for an agent as the store sees them now. Authoritative only inside the deciding
 * write transaction; outside it (pre-checks, quotes, dry runs) they are a snapshot.
 */
export function policyFacts(deps: AppDeps, agent: Agent, recipient: string, amountMicros: bigint, excludeMicros = 0n) {
  const now = deps.now();
  const committed = deps.store.payments.committedSince(agent.id, now - CAP_WINDOW_MS, now) - excludeMicros;
  return {
    agentStatus: agent.status, allowlist: agent.policy.allowlist, spendCapMicros: agent.policy.spendCapMicros,
    approvalThresholdMicros: agent.policy.approvalThresholdMicros, recipient, attributedSlug: null,
    amountMicros, committedMicros: committed, maxNetworkFeeWei: agent.policy.maxNetworkFeeWei,
  };
}

/**
 * POST /api/sign and PaymentPolicyService.Sign. Validates, resolves what is to be paid (for x402
 * and mpp by probing the paywall), and decides in one serialized write transaction that evaluates
 * the agent's policy and records the outcome with its hold on the cap. Authorizations are signed
 * just before that transaction (after a read-only check) and kept only if it allows them; raw
 * transactions are reserved first and signed after. No signature leaves before its commit is
 * durable. A repeat of (agent, Idempotency-Key) replays the stored outcome without charging again.
 */
export async function signPayment(deps: AppDeps, principal: ApiKeyPrincipal, input: PaymentRequestInput): Promise<SignResult> {
  const req = parsePaymentRequest(input, principal.mode);
  const agent = requireAgentInOrg(deps, principal.orgId, req.agentId);
  const treasury = treasuryOf(deps, principal.orgId);
  if (req.payload.kind === 'paywall') checkUrl(req.payload.resourceUrl, deps.probe);
  if (req.dryRun) {
    const intent = await resolveIntent(deps, principal, agent, req);
    const verdict = evaluatePolicy(intentFacts(deps, agent, intent));
    return { outcome: 'dry_run', agentId: agent.id, verdict, type: req.type, chainId: intent.chainId, recipient: getAddress(intent.recipient), amountMicros: intent.amountMicros };
  }
  const requestHash = createHash('sha256').update(canonicalRequest(req)).digest('hex');
  const key = req.idempotencyKey;
  if (key === undefined) return execute(deps, principal, agent, req, requestHash, treasury);

  const slot = `${agent.id}\u0000${key}`;
  for (let running = deps.inflight.get(slot); running; running = deps.inflight.get(slot)) {
    await running.catch(() => undefined);
  }
  // No await between this lookup and registering the promise: duplicates cannot slip in between.
  const existing = deps.store.payments.findByIdempotencyKey(agent.id, key) ?? deps.store.payments.findKeylessById(agent.id, key);
  const running = existing ? replay(deps, existing, requestHash, treasury) : execute(deps, principal, agent, req, requestHash, treasury);
  deps.inflight.set(slot, running);
  try {
    return await running;
  } finally {
    if (deps.inflight.get(slot) === running) deps.inflight.delete(slot);
  }
}

/**
 * What a request asks to pay, resolved: for the direct types straight from the request; for x402
 * and mpp from the challenge the resource URL answers with right now (the client's recipient and
 * amount are never used), attributed to a registered service when the registry vouches for it.
 */
type Intent = {
  chainId: number;
  recipient: string;
  /** Split recipients an MPP payment also pays. */
  otherRecipients: string[];
  /** Gas and fee cap the treasury pays for (raw transactions); null when the payer pays no fee in wei. */
  networkFee: NetworkFee | null;
  amountMicros: bigint;
  attributedSlug: string | null;
  attributionNote: string | null;
  resourceUrl: string;
  /** The ledger's `request` column: everything needed to sign later. */
  stored: string;
  needsNonce: boolean;
};

async function resolveIntent(deps: AppDeps, principal: ApiKeyPrincipal, agent: Agent, req: PaymentRequest): Promise<Intent> {
  if (req.payload.kind !== 'paywall') {
    return {
      chainId: req.chainId, recipient: req.recipient, otherRecipients: [], amountMicros: req.amountMicros, attributedSlug: null, attributionNote: null,
      networkFee: req.payload.kind === 'raw_transaction' ? { gas: req.payload.gas, maxFeePerGas: req.payload.maxFeePerGas } : null,
      resourceUrl: '', stored: storeRequest(req), needsNonce: req.type === 'raw_transaction',
    };
  }
  const { resourceUrl, method } = req.payload;
  const { offer, chain } = await probeOffer(deps, resourceUrl, method);
  if (offer.rail !== req.type) {
    throw invalidArgument(`type ${req.type} was requested but ${resourceUrl} offers ${offer.rail}`, 'rail_mismatch');
  }
  requireOfferChain(offer, principal.mode);
  const attribution = attributeOffer(deps, agent, offer, chain);
  const stored: StoredPaywallRequest = {
    type: offer.rail, chainId: offer.chainId, recipient: offer.payTo.toLowerCase(), amountMicros: offer.amountMicros.toString(),
    payload: req.payload, offer: offerToJson(offer),
  };
  return {
    chainId: offer.chainId, recipient: offer.payTo.toLowerCase(), otherRecipients: splitRecipients(offer), amountMicros: offer.amountMicros, networkFee: null,
    attributedSlug: attribution.attributed ? attribution.slug : null, attributionNote: attribution.note,
    resourceUrl, stored: JSON.stringify(stored), needsNonce: false,
  };
}

function intentFacts(deps: AppDeps, agent: Agent, intent: Intent) {
  return {
    ...policyFacts(deps, agent, intent.recipient, intent.amountMicros),
    otherRecipients: intent.otherRecipients, attributedSlug: intent.attributedSlug, attributionNote: intent.attributionNote,
    networkFee: intent.networkFee,
  };
}

async function execute(deps: AppDeps, principal: ApiKeyPrincipal, agent: Agent, req: PaymentRequest, requestHash: string, treasury: Address): Promise<SignResult> {
  const intent = await resolveIntent(deps, principal, agent, req);
  // The signing stage is bounded: beyond it the payment is refused (503 overloaded) here, before
  // anything is signed or written. The slot is held until the outcome is settled.
  const release = deps.signer.admit();
  try {
    return await decide(deps, principal, agent, req, requestHash, treasury, intent);
  } finally {
    release();
  }
}

async function decide(deps: AppDeps, principal: ApiKeyPrincipal, agent: Agent, req: PaymentRequest, requestHash: string, treasury: Address, intent: Intent): Promise<SignResult> {
  const { payments, approvals, agents, organizations } = deps.store;

  // Authorizations and paywall payments do not depend on ledger state, so when a read-only check
  // says the payment will pass they are signed first and recorded in the same commit as the
  // decision: one durable write per payment. If the decision changes in between (a concurrent
  // payment took the headroom), the signature is dropped unseen. Raw transactions need an account
  // nonce from the ledger, so they are reserved first and signed after.
  let presigned: SignedPayment | undefined;
  if (!intent.needsNonce && evaluatePolicy(intentFacts(deps, agent, intent)).outcome === 'allowed') {
    presigned = await signOrFail(deps, principal.orgId, treasury, intent.stored);
  }

  const reserved = await deps.store.writes.run(() => {
    const current = agents.get(agent.id) ?? agent;
    const now = deps.now();
    const verdict = evaluatePolicy(intentFacts(deps, current, intent));
    const row: Omit<PaymentRow, 'status'> = {
      id: newUuid(), orgId: principal.orgId, agentId: agent.id, type: req.type, chainId: intent.chainId,
      recipient: intent.recipient, amountMicros: intent.amountMicros, reason: '', serviceSlug: intent.attributedSlug ?? '',
      resourceUrl: intent.resourceUrl, idempotencyKey: req.idempotencyKey ?? null, requestHash, request: intent.stored, result: null,
      approvalId: null, createdAt: now,
    };
    if (verdict.outcome === 'denied') {
      payments.insert({ ...row, status: 'denied', reason: verdict.reason });
      return { verdict, row };
    }
    if (verdict.outcome === 'pending_approval') {
      const approvalId = newUuid();
      const windowMs = organizations.get(principal.orgId)!.approvalWindowSeconds * 1000;
      payments.insert({ ...row, status: 'pending_approval', reason: verdict.reason, approvalId });
      approvals.insert({
        id: approvalId, orgId: principal.orgId, agentId: agent.id, transactionId: row.id, status: 'pending', createdAt: now,
        expiresAt: now + windowMs, decidedAt: null, decidedBy: '', note: '',
      });
      return { verdict, row: { ...row, approvalId } };
    }
    if (presigned) {
      payments.insert({ ...row, status: 'signed', result: JSON.stringify(presigned) });
      return { verdict, row, signed: presigned };
    }
    payments.insert({ ...row, status: 'signing' });
    const nonce = intent.needsNonce ? payments.allocateNonce(principal.orgId, intent.chainId, row.id) : undefined;
    return { verdict, row, nonce };
  });
  const { verdict, row } = reserved;
  if (verdict.outcome === 'denied') return { outcome: 'denied', agentId: agent.id, transactionId: row.id, reason: verdict.reason, idempotent: false };
  if (verdict.outcome === 'pending_approval') {
    return { outcome: 'pending_approval', agentId: agent.id, transactionId: row.id, approvalRequestId: row.approvalId!, reason: verdict.reason, idempotent: false };
  }
  const signed = reserved.signed ?? (await signAndSettle(deps, row.id, principal.orgId, treasury, row.request, reserved.nonce));
  return allowedResult(row, signed, false);
}

async function signOrFail(deps: AppDeps, orgId: string, treasury: Address, stored: string, nonce?: number): Promise<SignedPayment> {
  const mppOffer = storedMppOffer(stored);
  const fees = mppOffer ? await deps.tempoFees.feesFor(mppOffer, getAddress(treasury)) : undefined;
  let prepared;
  try {
    prepared = preparePayment(deps, orgId, getAddress(treasury), stored, nonce, fees);
  } catch (err) {
    // A challenge the builders refuse (expired, bad splits) is the caller's 400, not our failure.
    if (err instanceof DomainError && err.kind === 'invalid_argument') throw err;
    throw new DomainError('internal', 'Signing failed', { cause: err });
  }
  try {
    return prepared.finish(await deps.signer.sign(prepared.job));
  } catch (err) {
    throw new DomainError('internal', 'Signing failed', { cause: err });
  }
}

/**
 * Signs a reserved row (status `signing`) and records the result; the signature only leaves the
 * process after the settling commit. If signing fails, or the settling commit fails (a full disk
 * surfaces as SQLITE_FULL and rolls back, so the row is certainly still `signing`), the signature
 * is dropped unseen and the reservation ends: `failed`, or back to `approved` when a human
 * approved it (payments.ts releaseSigning). If even that write fails, the row is remembered in
 * deps.stranded and released by the sweep or the next successful settle. A failed sync is not
 * retried here: it stops the service (db.ts failStop) and the restart repairs the row.
 */
export async function signAndSettle(deps: AppDeps, rowId: string, orgId: string, treasury: Address, stored: string, nonce?: number): Promise<SignedPayment> {
  let signed: SignedPayment;
  try {
    signed = await signOrFail(deps, orgId, treasury, stored, nonce);
  } catch (err) {
    await endSigning(deps, rowId, 'Signing failed');
    throw err;
  }
  let settled: boolean;
  try {
    settled = await deps.store.writes.run(() => deps.store.payments.settleSigned(rowId, JSON.stringify(signed), deps.now()));
  } catch (err) {
    await endSigning(deps, rowId, 'Recording the signature failed; it was discarded unsent');
    throw err;
  }
  if (!settled) throw new DomainError('internal', 'Payment changed state while signing', { meta: { rowId } });
  // Writes succeed again: release what a failed write left behind.
  releaseStranded(deps);
  return signed;
}

/** Ends a `signing` row that will not be signed now; on a failed write, leaves it to releaseStranded. */
async function endSigning(deps: AppDeps, rowId: string, reason: string): Promise<void> {
  try {
    await deps.store.writes.run(() => deps.store.payments.releaseSigning(rowId, reason, deps.now()));
  } catch (err) {
    // After a failed sync the service is stopping: the restart repairs the row.
    if (deps.store.failure()) return;
    if (deps.stranded.size === 0) {
      deps.log.error({ err }, 'a write failed, leaving payments in signing; they are released once writes succeed again');
    }
    deps.stranded.set(rowId, reason);
  }
}

/**
 * Releases the rows in deps.stranded (payments.ts releaseSigning) in one write; called by the
 * sweep and after each successful settle. Returns how many it released; on another failed write
 * they stay for the next attempt.
 */
export function releaseStranded(deps: AppDeps): number {
  if (deps.stranded.size === 0 || deps.store.failure()) return 0;
  const rows = [...deps.stranded];
  let outcomes: Array<'approved' | 'failed' | undefined>;
  try {
    outcomes = writeTxn(deps.store.db, () => rows.map(([id, reason]) => deps.store.payments.releaseSigning(id, reason, deps.now())));
  } catch {
    return 0;
  }
  for (const [id] of rows) deps.stranded.delete(id);
  deps.log.warn({
    failed: rows.filter((_, i) => outcomes[i] === 'failed').map(([id]) => id),
    approved: rows.filter((_, i) => outcomes[i] === 'approved').map(([id]) => id),
  }, 'released payments a failed write had left in signing');
  return rows.length;
}

/**
 * Collects an approved payment. A paywall payment is signed only now: the challenge is probed
 * again (the one the human saw may have expired), and signed only if it still pays the same
 * recipient, token and chain no more than was approved. A direct payment is approved only after
 * its signing at decision time failed or was cut off by a crash; it is signed from its stored
 * request (a raw transaction gets its nonce here). Either way the write transaction that starts
 * signing re-checks everything the human did not override (agent status, allowlist with the
 * fresh probe's attribution, network fee ceiling, cap without this payment's own hold; not the
 * threshold) and the collection window, like a direct approval is re-checked when decided.
 * Otherwise the approval cannot be used: 403 with the reason, and the hold is released.
 */
async function collectApproved(deps: AppDeps, row: PaymentRow, treasury: Address): Promise<SignResult> {
  const { payments, agents } = deps.store;
  const paywall = isPaywallRequest(row.request);
  // An expired collection costs no probe.
  if (paywall && await deps.store.writes.run(() => expireCollectionIfDue(deps, row.id))) return replay(deps, payments.get(row.id)!, row.requestHash, treasury);
  const probed = paywall ? await probeApproved(deps, row) : undefined;
  const request = probed?.request ?? row.request;
  const step = await deps.store.writes.run(() => {
    const now = deps.now();
    if (expireCollectionIfDue(deps, row.id)) return { kind: 'over' as const };
    if (probed && !sameOffer(probed.offer, probed.approved)) {
      const { offer } = probed;
      const reason = `The paywall's offer changed after approval (now ${offer.amountMicros} micro-USD to ${offer.payTo} on chain ${offer.chainId}); send a new request`;
      return { kind: payments.denyApproved(row.id, reason, now) ? 'denied' as const : 'over' as const, reason };
    }
    const agent = agents.get(row.agentId);
    if (!agent) return { kind: 'over' as const };
    // Within its collection window the approved row's hold is inside the cap window: count it
    // once, as this payment.
    const verdict = probed ? recheckProbed(deps, agent, row, probed) : recheckApproved(deps, agent, row, row.amountMicros);
    if (verdict.outcome !== 'allowed') {
      const reason = `Policy re-check at collection refused the approved payment: ${verdict.outcome === 'denied' ? verdict.reason : 'policy refused'}`;
      return { kind: payments.denyApproved(row.id, reason, now) ? 'denied' as const : 'over' as const, reason };
    }
    if (!payments.startSigningFromApproved(row.id, request, now)) return { kind: 'over' as const };
    const nonce = row.type === 'raw_transaction' ? payments.allocateNonce(row.orgId, row.chainId, row.id) : undefined;
    return { kind: 'sign' as const, nonce };
  });
  // Someone else moved the row first (a concurrent collection, the sweep): report what it is now.
  if (step.kind === 'over') return replay(deps, payments.get(row.id)!, row.requestHash, treasury);
  if (step.kind === 'denied') return { outcome: 'denied', agentId: row.agentId, transactionId: row.id, reason: step.reason, idempotent: true };
  const signed = await signAndSettle(deps, row.id, row.orgId, treasury, request, step.nonce);
  return allowedResult(row, signed, true);
}

type Probed = { offer: Offer; chain: readonly string[]; approved: Offer; request: string };

/** The approved paywall payment's challenge as the paywall answers now; `request` stores it. */
async function probeApproved(deps: AppDeps, row: PaymentRow): Promise<Probed> {
  const stored = JSON.parse(row.request) as StoredPaywallRequest;
  const { offer, chain } = await probeOffer(deps, stored.payload.resourceUrl, stored.payload.method);
  return { offer, chain, approved: offerFromJson(stored.offer), request: JSON.stringify({ ...stored, offer: offerToJson(offer) }) };
}

/** The collection re-check of a paywall payment against the fresh offer and its attribution now. */
function recheckProbed(deps: AppDeps, agent: Agent, row: PaymentRow, probed: Probed): Verdict {
  const attribution = attributeOffer(deps, agent, probed.offer, probed.chain);
  return evaluatePolicy({
    ...policyFacts(deps, agent, probed.offer.payTo.toLowerCase(), row.amountMicros, row.amountMicros),
    otherRecipients: splitRecipients(probed.offer),
    attributedSlug: attribution.attributed ? attribution.slug : null,
    attributionNote: attribution.note,
  }, { skipThreshold: true });
}

function allowedResult(row: Omit<PaymentRow, 'status'>, signed: SignedPayment, idempotent: boolean): SignResult {
  return {
    outcome: 'allowed', agentId: row.agentId, transactionId: row.id, idempotent, amountMicros: row.amountMicros,
    chainId: row.chainId, type: row.type as PaymentType, recipient: getAddress(row.recipient), signed, resourceUrl: row.resourceUrl,
  };
}

/** Replays the stored outcome of an earlier request with the same key. */
async function replay(deps: AppDeps, row: PaymentRow, requestHash: string, treasury: Address): Promise<SignResult> {
  if (row.requestHash !== requestHash) {
    throw new DomainError('conflict', 'Idempotency-Key was already used for a different request', { code: 'idempotency_key_reused' });
  }
  const base = { agentId: row.agentId, transactionId: row.id, idempotent: true };
  let current = row;
  if (current.status === 'pending_approval' && current.approvalId) {
    expireIfDue(deps, current.approvalId);
    current = deps.store.payments.get(row.id)!;
  }
  // The row may have come from a group commit whose WAL sync is still running: answer only after
  // a sync that started after this read, so no replayed outcome is ahead of the disk.
  if (current.status !== 'approved') await deps.store.writes.durable();
  switch (current.status) {
    case 'signed':
      return allowedResult(current, JSON.parse(current.result!) as SignedPayment, true);
    case 'pending_approval':
      return { outcome: 'pending_approval', ...base, approvalRequestId: current.approvalId!, reason: current.reason };
    case 'approved':
      return collectApproved(deps, current, treasury);
    case 'denied':
    case 'expired':
      return { outcome: 'denied', ...base, reason: current.reason };
    case 'signing':
      throw new DomainError('conflict', 'This payment is still being signed; repeat the request shortly', { code: 'in_progress' });
    default:
      throw new DomainError('failed_precondition', 'Signing this payment failed; send a new request with a new Idempotency-Key', { code: 'signing_failed' });
  }
}
