import type { Address } from 'viem';
import { DomainError, invalidArgument } from '../domain/errors.js';
import { evaluatePolicy, type Verdict } from '../domain/policy.js';
import type { Agent, ApiKeyPrincipal, Principal } from '../domain/types.js';
import { UUID, optionalText, requireName } from '../domain/validate.js';
import { writeTxn } from '../store/db.js';
import type { ApprovalRow } from '../store/approvals.js';
import type { PaymentRow } from '../store/payments.js';
import type { AppDeps } from './deps.js';
import { inScope, requirePermission } from './access.js';
import { requireOrgAccess } from './organizations.js';
import { CAP_WINDOW_MS, policyFacts, releaseStranded, signAndSettle } from './sign.js';
import { isPaywallRequest, type StoredPaywallRequest } from './preparePayment.js';
import { offerFromJson, splitRecipients } from './paywall.js';
import { loadRequest } from './signedPayment.js';
import { atomicToMicros } from '../domain/money.js';
import { maxNetworkFeeWei, type NetworkFee } from '../domain/networkFee.js';
import { MAX_TEMPO_FEE } from '../signing/tempo.js';

/** Split recipients of a stored paywall request (none for the direct types). */
function storedSplitRecipients(request: string): string[] {
  return isPaywallRequest(request) ? splitRecipients(offerFromJson((JSON.parse(request) as StoredPaywallRequest).offer)) : [];
}

/** Gas and fee cap of a stored raw transaction, whose fee the treasury pays; null for other types. */
function storedNetworkFee(request: string): NetworkFee | null {
  if (isPaywallRequest(request)) return null;
  const { payload } = loadRequest(request);
  return payload.kind === 'raw_transaction' ? { gas: payload.gas, maxFeePerGas: payload.maxFeePerGas } : null;
}

/** MAX_TEMPO_FEE in micro-USD: Tempo fees are in attodollars, 18 decimals of a dollar. */
const MAX_TEMPO_FEE_MICROS = atomicToMicros(MAX_TEMPO_FEE, 18).micros;

/** An MPP payment whose Tempo fee the treasury pays (the paywall does not sponsor it). */
function paysTempoFee(request: string): boolean {
  if (!isPaywallRequest(request)) return false;
  const stored = JSON.parse(request) as StoredPaywallRequest;
  return stored.type === 'mpp' && offerFromJson(stored.offer).mpp?.request.methodDetails.feePayer !== true;
}

export const EXPIRED_REASON = 'Approval request expired before a human decided';

function notFound(): DomainError {
  return new DomainError('not_found', 'Approval not found', { code: 'approval_not_found' });
}

/**
 * Moves a pending approval past its window to `expired` and releases its hold on the cap.
 * Runs in its own write transaction (or joins the caller's). Returns true when it expired one.
 */
export function expireIfDue(deps: AppDeps, approvalId: string): boolean {
  return writeTxn(deps.store.db, () => {
    const a = deps.store.approvals.get(approvalId);
    if (!a || a.status !== 'pending' || a.expiresAt > deps.now()) return false;
    deps.store.approvals.expire(a.id);
    deps.store.payments.releasePending(a.transactionId, 'expired', EXPIRED_REASON, deps.now());
    return true;
  });
}

/**
 * How long an approved paywall payment waits for its agent to collect it, counted from the
 * decision. The approved row holds the cap from the decision time (its cap_at), so a window much
 * shorter than the 24-hour cap window means the hold is released long before it would stop
 * counting: a hold never outlives the cap's own accounting. Collection moves cap_at to the
 * signing time, so the signed payment counts for a full window from its signature.
 */
export const COLLECTION_WINDOW_MS = 15 * 60 * 1000;

export const COLLECTION_EXPIRED_REASON = 'Approved payment was not collected within 15 minutes of the approval; send a new request';

/**
 * Moves an approved paywall payment whose collection window has closed to `expired` and releases
 * its hold. Runs in its own write transaction (or joins the caller's). True when it expired it.
 */
export function expireCollectionIfDue(deps: AppDeps, transactionId: string): boolean {
  return writeTxn(deps.store.db, () => {
    const now = deps.now();
    return deps.store.payments.expireApproved(transactionId, now - COLLECTION_WINDOW_MS, COLLECTION_EXPIRED_REASON, now);
  });
}

/**
 * Expires every overdue approval and every approved payment left uncollected past its window;
 * run periodically so holds are released without a read.
 */
export function sweepExpiredApprovals(deps: AppDeps): number {
  // Rows a failed write left in signing go first: an approved one may then expire right here.
  releaseStranded(deps);
  let expired = 0;
  for (const a of deps.store.approvals.due(deps.now())) if (expireIfDue(deps, a.id)) expired++;
  for (const id of deps.store.payments.overdueApproved(deps.now() - COLLECTION_WINDOW_MS)) if (expireCollectionIfDue(deps, id)) expired++;
  return expired;
}

/**
 * The policy re-check of an approved payment (when decided, and when a direct payment is
 * collected again): everything but the threshold, which the human overrides. `ownMicros` is the
 * payment's own hold inside the cap window, counted once, as this payment. The registry
 * attribution made when the payment was requested still vouches for a slug entry; the network fee
 * is checked again because the ceiling may have been lowered while the payment waited.
 */
export function recheckApproved(deps: AppDeps, agent: Agent, tx: PaymentRow, ownMicros: bigint): Verdict {
  return evaluatePolicy({
    ...policyFacts(deps, agent, tx.recipient, tx.amountMicros, ownMicros),
    attributedSlug: tx.serviceSlug || null,
    otherRecipients: storedSplitRecipients(tx.request),
    networkFee: storedNetworkFee(tx.request),
  }, { skipThreshold: true });
}

export const INTERRUPTED_EXPIRED_REASON = 'Signing the approved payment was interrupted and it was not collected within 15 minutes of the approval; send a new request';

/**
 * Start-up repair of what a crash cut off while signing, in one write transaction. No signature
 * of a row still in `signing` was ever returned (it leaves only after the settling commit), so:
 * a row whose approval is approved goes back to `approved` (hold kept, nonce handed back, its
 * collection window counted from the decision) and the agent's repeat collects it; every other
 * row is `failed` and releases its hold and nonce. Rows an older build failed although their
 * approval was approved are reopened the same way within the collection window, else `expired`
 * with INTERRUPTED_EXPIRED_REASON.
 */
export function repairInterrupted(deps: AppDeps): { reapproved: number; failed: number; reopened: number; expired: number } {
  const { payments } = deps.store;
  return writeTxn(deps.store.db, () => {
    const now = deps.now();
    const reapproved = payments.reapproveInterrupted(now);
    const failed = payments.failInterrupted(now);
    return { reapproved, failed, ...payments.reopenFailedApprovals(now - COLLECTION_WINDOW_MS, INTERRUPTED_EXPIRED_REASON, now) };
  });
}

/**
 * GET /api/approvals/{id}/status: scoped to the key's organization. Unknown ids, malformed ids
 * and other organizations' approvals are the same 404, so nothing leaks across organizations.
 */
export function getApprovalStatus(deps: AppDeps, principal: ApiKeyPrincipal, id: string): ApprovalRow {
  if (!UUID.test(id)) throw notFound();
  const a = deps.store.approvals.get(id);
  if (!a || a.orgId !== principal.orgId) throw notFound();
  if (a.status === 'pending' && a.expiresAt <= deps.now()) expireIfDue(deps, a.id);
  return deps.store.approvals.get(id)!;
}

export function listApprovals(deps: AppDeps, principal: Principal, orgId: string, status: string): ApprovalRow[] {
  requireOrgAccess(deps, principal, 'read', orgId);
  if (status !== '' && !['pending', 'approved', 'denied', 'expired'].includes(status)) {
    throw invalidArgument('status must be one of pending, approved, denied, expired');
  }
  sweepExpiredApprovals(deps);
  return deps.store.approvals.listByOrg(orgId, status || undefined);
}

export type Decision = 'approve' | 'deny';

/**
 * A human's decision. Approval re-checks agent status, allowlist and cap in the same write
 * transaction that marks it approved (the human overrides only the threshold), then signs; the
 * agent collects the signature by repeating its request. If that signing fails or is cut off, the
 * decision stands: the payment goes back to `approved` and the agent's repeat signs it (sign.ts
 * collectApproved). Denial releases the reservation.
 * Needs `decide`; an organization-bound principal reaches its own organization's approvals only
 * (another's are the same 404 as unknown ids). A dashboard user is recorded as its email; only
 * the operator names the decider (`decidedBy`, 'operator' when blank).
 */
export async function decideApproval(
  deps: AppDeps,
  principal: Principal,
  input: { id: string; decision: Decision | undefined; note: string; decidedBy?: string },
): Promise<ApprovalRow> {
  requirePermission(principal, 'decide');
  if (input.decision !== 'approve' && input.decision !== 'deny') throw invalidArgument('decision must be approve or deny');
  const note = optionalText(input.note.trim(), 'note', 1000);
  const named = principal.kind === 'dashboard_user' ? principal.email : (input.decidedBy ?? '');
  const decidedBy = named.trim() === '' ? 'operator' : requireName(named, 'decided_by');
  if (!UUID.test(input.id)) throw notFound();
  const { approvals, payments, agents } = deps.store;

  const step = writeTxn(deps.store.db, () => {
    const a = approvals.get(input.id);
    if (!a || !inScope(principal, a.orgId)) throw notFound();
    const now = deps.now();
    if (a.status === 'pending' && a.expiresAt <= now) {
      approvals.expire(a.id);
      payments.releasePending(a.transactionId, 'expired', EXPIRED_REASON, now);
      return { kind: 'expired' as const };
    }
    if (a.status !== 'pending') return { kind: 'decided' as const, status: a.status };
    const tx = payments.get(a.transactionId)!;
    if (input.decision === 'deny') {
      approvals.decide(a.id, 'denied', now, decidedBy, note);
      payments.releasePending(tx.id, 'denied', note ? `Denied by approver: ${note}` : 'Denied by approver', now);
      return { kind: 'done' as const };
    }
    const agent = agents.get(a.agentId)!;
    // The pending row already holds its amount against the cap; count it once, as this payment.
    const own = tx.createdAt > now - CAP_WINDOW_MS ? tx.amountMicros : 0n;
    const verdict = recheckApproved(deps, agent, tx, own);
    if (verdict.outcome !== 'allowed') return { kind: 'refused' as const, reason: verdict.outcome === 'denied' ? verdict.reason : 'policy refused' };
    approvals.decide(a.id, 'approved', now, decidedBy, note);
    // A paywall's challenge may have expired while the human decided: it is probed and signed
    // afresh when the agent collects the payment, not here.
    if (isPaywallRequest(tx.request)) {
      payments.markApproved(tx.id, now);
      return { kind: 'done' as const };
    }
    payments.startSigningApproved(tx.id, now);
    const nonce = tx.type === 'raw_transaction' ? payments.allocateNonce(tx.orgId, tx.chainId, tx.id) : undefined;
    return { kind: 'sign' as const, tx, nonce };
  });

  switch (step.kind) {
    case 'expired':
      throw new DomainError('failed_precondition', 'Approval has expired', { code: 'approval_expired' });
    case 'decided':
      throw new DomainError('failed_precondition', `Approval is already ${step.status}`, { code: 'approval_decided' });
    case 'refused':
      throw new DomainError('failed_precondition', `Policy re-check refused the approval: ${step.reason}`, { code: 'policy_recheck_failed' });
    case 'sign': {
      const treasury = deps.vault.address(step.tx.orgId) as Address;
      try {
        await signAndSettle(deps, step.tx.id, step.tx.orgId, treasury, step.tx.request, step.nonce);
      } catch (err) {
        // The decision stands: the payment went back to `approved` (or will, see releaseStranded)
        // and the agent's repeat signs it within the collection window. Only a stopped store is
        // reported, since nothing is acknowledged then.
        if (deps.store.failure()) throw err;
        deps.log.warn({ err, transactionId: step.tx.id }, 'signing an approved payment failed; the agent collects it by repeating its request');
      }
      break;
    }
    case 'done':
      break;
  }
  return approvals.get(input.id)!;
}

/**
 * An approval joined with what it is about, for operators and the dashboard. The most the
 * payment can cost in network fees on top of its amount: `maxNetworkFeeWei` for a raw
 * transaction (gas × max fee per gas, paid in ETH), `maxTempoFeeMicros` for an MPP payment whose
 * fee the treasury pays (the service-wide bound, paid in the stablecoin); both null when
 * the treasury pays no fee (x402, EIP-3009, Permit2, a sponsored MPP payment).
 */
export type ApprovalView = ApprovalRow & {
  amountMicros: bigint; recipient: string; reason: string; serviceSlug: string;
  maxNetworkFeeWei: bigint | null; maxTempoFeeMicros: bigint | null;
};

export function describeApproval(deps: AppDeps, a: ApprovalRow): ApprovalView {
  const tx = deps.store.payments.get(a.transactionId);
  const fee = tx ? storedNetworkFee(tx.request) : null;
  return {
    ...a, amountMicros: tx?.amountMicros ?? 0n, recipient: tx?.recipient ?? '', reason: tx?.reason ?? '', serviceSlug: tx?.serviceSlug ?? '',
    maxNetworkFeeWei: fee ? maxNetworkFeeWei(fee) : null,
    maxTempoFeeMicros: tx && paysTempoFee(tx.request) ? MAX_TEMPO_FEE_MICROS : null,
  };
}
