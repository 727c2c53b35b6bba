import type { Address } from 'viem';
import { DomainError, invalidArgument } from '../../domain/errors.js';
import type { ApiKeyPrincipal, Principal } from '../../domain/types.js';
import { UUID, optionalText, requireName } from '../../domain/validate.js';
import type { ApprovalRow, PaymentRow } from '../../store/port.js';
import type { AppDeps } from '../deps.js';
import { inScope, requirePermission } from '../access.js';
import { requireOrgAccess } from '../access.js';
import { expireIfDue, sweepExpiredApprovals } from '../payments/expiry.js';
import { CAP_WINDOW_MS } from '../payments/policyFacts.js';
import { recheckApproved, storedNetworkFee } from '../payments/recheck.js';
import { signAndSettle } from '../payments/settle.js';
import { withinWrite } from '../withinWrite.js';
import { readFundsForSigning, treasuryFundsVerdict, treasuryRefusal } from '../payments/funds.js';
import { isPaywallRequest, type StoredPaywallRequest } from '../payments/signatures.js';
import { offerFromJson, offerPayees } from '../payments/paywall.js';
import { atomicToMicros } from '../../domain/money.js';
import { maxNetworkFeeWei } from '../../domain/networkFee.js';
import { MAX_TEMPO_FEE } from '../../signing/tempo.js';

// Tests import the sweep from here, where it lived before maintenance.ts.
export { sweepExpiredApprovals } from '../payments/expiry.js';

/** MAX_TEMPO_FEE in micro-USD: Tempo fees are in attodollars, 18 decimals of a dollar. */
const MAX_TEMPO_FEE_MICROS = atomicToMicros(MAX_TEMPO_FEE, 18).micros;

/** An MPP payment whose Tempo fee the treasury pays (the paywall does not sponsor it). */
function paysTempoFee(request: string): boolean {
  if (!isPaywallRequest(request)) return false;
  const stored = JSON.parse(request) as StoredPaywallRequest;
  return stored.type === 'mpp' && offerFromJson(stored.offer).mpp?.request.methodDetails.feePayer !== true;
}

function notFound(): DomainError {
  return new DomainError('not_found', 'Approval not found', { code: 'approval_not_found' });
}

/**
 * GET /api/approvals/{id}/status: scoped to the key's organization. Unknown ids, malformed ids
 * and other organizations' approvals are the same 404, so nothing leaks across organizations.
 */
export async function getApprovalStatus(deps: AppDeps, principal: ApiKeyPrincipal, id: string): Promise<ApprovalRow> {
  if (!UUID.test(id)) throw notFound();
  const a = await deps.store.approvals.get(id);
  if (!a || a.orgId !== principal.orgId) throw notFound();
  await expireIfDue(deps, a.id);
  return (await deps.store.approvals.get(id))!;
}

export async function listApprovals(deps: AppDeps, principal: Principal, orgId: string, status: string): Promise<ApprovalRow[]> {
  await requireOrgAccess(deps, principal, 'read', orgId);
  if (status !== '' && !['pending', 'approved', 'denied', 'expired'].includes(status)) {
    throw invalidArgument('status must be one of pending, approved, denied, expired');
  }
  await sweepExpiredApprovals(deps);
  return deps.store.approvals.listByOrg(orgId, status || undefined);
}

export type Decision = 'approve' | 'deny';

/**
 * A human's decision. Approval re-checks agent status, allowlist and cap in the same write
 * transaction that marks it approved (the human overrides only the threshold), then signs; the
 * agent collects the signature by repeating its request. If that signing fails or is cut off, the
 * decision stands: the payment goes back to `approved` and the agent's repeat signs it (replay.ts
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
  // Approving a raw transaction reserves its nonce: the first reservation on a chain with an
  // endpoint starts from the node's pending nonce, asked before the write as for a direct payment.
  const pending = await deps.store.approvals.get(input.id);
  const pendingTx = pending && inScope(principal, pending.orgId) && input.decision !== 'deny' ? await deps.store.payments.get(pending.transactionId) : undefined;
  // Its treasury's balances are read beside it and compared in the write, as for a direct payment.
  const [nonceFloor, funds] = pendingTx?.type === 'raw_transaction'
    ? await Promise.all([
      deps.submitter.nonceFloor(pendingTx.orgId, pendingTx.chainId, deps.vault.address(pendingTx.orgId) as Address),
      readFundsForSigning(deps, pendingTx.chainId, deps.vault.address(pendingTx.orgId) as Address),
    ])
    : [undefined, undefined];

  const step = await deps.uow.write(async (store) => {
    const { approvals, payments, agents } = store;
    const inTx = withinWrite(deps, store);
    const a = await approvals.get(input.id);
    if (!a || !inScope(principal, a.orgId)) throw notFound();
    if (await expireIfDue(inTx, a.id)) return { kind: 'expired' as const };
    const now = deps.now();
    if (a.status !== 'pending') return { kind: 'decided' as const, status: a.status };
    const tx = (await payments.get(a.transactionId))!;
    if (input.decision === 'deny') {
      await approvals.decide(a.id, 'denied', now, decidedBy, note);
      await payments.releasePending(tx.id, 'denied', note ? `Denied by approver: ${note}` : 'Denied by approver', now);
      return { kind: 'done' as const };
    }
    const agent = (await agents.getForUse(a.agentId))!;
    // The pending row already holds its amount against the cap; count it once, as this payment.
    const own = tx.createdAt > now - CAP_WINDOW_MS ? tx.amountMicros : 0n;
    const verdict = await recheckApproved(inTx, agent, tx, own);
    if (verdict.outcome !== 'allowed') return { kind: 'refused' as const, reason: verdict.outcome === 'denied' ? verdict.reason : 'policy refused' };
    // A treasury that cannot pay refuses the decision (nothing changes; 503 chain_unavailable when its node did not answer).
    const funded = tx.type === 'raw_transaction'
      ? await treasuryFundsVerdict(inTx, tx.orgId, tx.chainId, funds, { amountMicros: tx.amountMicros, networkFee: storedNetworkFee(tx.request) }, verdict)
      : verdict;
    const unfunded = funded.outcome === 'denied' ? treasuryRefusal(funded) : undefined;
    if (unfunded) return { kind: 'unfunded' as const, error: unfunded };
    await approvals.decide(a.id, 'approved', now, decidedBy, note);
    // A paywall's challenge may have expired while the human decided: it is probed and signed
    // afresh when the agent collects the payment, not here. A raw transaction paypolicy cannot
    // broadcast is signed at collection too, where the collecting key's mode decides whether it
    // may be handed out (payments/signatures.ts requireBroadcast).
    if (isPaywallRequest(tx.request) || (tx.type === 'raw_transaction' && !deps.submitter.broadcasts(tx.chainId))) {
      await payments.markApproved(tx.id, now);
      return { kind: 'done' as const };
    }
    await payments.startSigningApproved(tx.id, now);
    const floored = tx.type === 'raw_transaction' && await deps.submitter.applyNonceFloor(payments, tx.orgId, tx.chainId, nonceFloor);
    const nonce = tx.type === 'raw_transaction' ? await payments.allocateNonce(tx.orgId, tx.chainId, tx.id) : undefined;
    return { kind: 'sign' as const, tx, nonce, floored };
  }, { alone: true });
  // Only once the floor is committed: the pair needs no more asking of the node.
  if (step.kind === 'sign' && step.floored) deps.submitter.markNonceSynced(step.tx.orgId, step.tx.chainId);

  switch (step.kind) {
    case 'expired':
      throw new DomainError('failed_precondition', 'Approval has expired', { code: 'approval_expired' });
    case 'decided':
      throw new DomainError('failed_precondition', `Approval is already ${step.status}`, { code: 'approval_decided' });
    case 'refused':
      throw new DomainError('failed_precondition', `Policy re-check refused the approval: ${step.reason}`, { code: 'policy_recheck_failed' });
    case 'unfunded':
      throw step.error;
    case 'sign': {
      const treasury = deps.vault.address(step.tx.orgId) as Address;
      try {
        await signAndSettle(deps, step.tx.id, step.tx.orgId, treasury, step.tx.request, step.nonce);
      } catch (err) {
        // The decision stands: the payment went back to `approved` (or will, see deps.stranded)
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
  return (await deps.store.approvals.get(input.id))!;
}

/**
 * An approval joined with what it is about, for operators and the dashboard. The most the
 * payment can cost in network fees on top of its amount: `maxNetworkFeeWei` for a raw
 * transaction (gas × max fee per gas, paid in ETH), `maxTempoFeeMicros` for an MPP payment whose
 * fee the treasury pays (the service-wide bound, paid in the stablecoin); both null when
 * the treasury pays no fee (x402, EIP-3009, Permit2, a sponsored MPP payment). `payees` is
 * every address the payment pays and how much, in signing order: the recipient's share first,
 * then an MPP challenge's splits; a payment without splits has the one recipient and its amount.
 */
export type ApprovalView = ApprovalRow & {
  amountMicros: bigint; recipient: string; reason: string; serviceSlug: string;
  payees: Array<{ recipient: string; amountMicros: bigint }>;
  maxNetworkFeeWei: bigint | null; maxTempoFeeMicros: bigint | null;
};

/** What the stored payment pays whom; for a paywall, the offer collection must match (paywall.ts sameOffer). */
function storedPayees(tx: PaymentRow): ApprovalView['payees'] {
  if (!isPaywallRequest(tx.request)) return [{ recipient: tx.recipient, amountMicros: tx.amountMicros }];
  return offerPayees(offerFromJson((JSON.parse(tx.request) as StoredPaywallRequest).offer));
}

export async function describeApproval(deps: AppDeps, a: ApprovalRow): Promise<ApprovalView> {
  const tx = await deps.store.payments.get(a.transactionId);
  const fee = tx ? storedNetworkFee(tx.request) : null;
  return {
    ...a, amountMicros: tx?.amountMicros ?? 0n, recipient: tx?.recipient ?? '', reason: tx?.reason ?? '', serviceSlug: tx?.serviceSlug ?? '',
    payees: tx ? storedPayees(tx) : [],
    maxNetworkFeeWei: fee ? maxNetworkFeeWei(fee) : null,
    maxTempoFeeMicros: tx && paysTempoFee(tx.request) ? MAX_TEMPO_FEE_MICROS : null,
  };
}
