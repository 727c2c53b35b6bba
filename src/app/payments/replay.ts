import type { RuleInfo } from '../../domain/policy.js';
import type { Address } from 'viem';
import { DomainError } from '../../domain/errors.js';
import { unauthenticated } from '../accounts/auth/credentials.js';
import type { PaymentRow } from '../../store/port.js';
import { expireCollectionIfDue, expireIfDue } from './expiry.js';
import type { AppDeps } from '../deps.js';
import { describePayees, feePayerText, offerFromJson, offerPayees, offerToJson, probeOffer, sameFeePayer, sameOffer, samePayees } from './paywall.js';
import { isPaywallRequest, type StoredPaywallRequest } from './signatures.js';
import { recheckApproved, recheckProbed, storedNetworkFee } from './recheck.js';
import { allowedResult, answerSigned, signAndSettle, type SignResult } from './settle.js';
import { requireBroadcast, type SignedPayment } from './signatures.js';
import { withinWrite } from '../withinWrite.js';
import { readFundsForSigning, treasuryFundsVerdict, treasuryRefusal } from './funds.js';
import type { Offer } from '../../paywalls/offer.js';

/**
 * A repeat of (agent, Idempotency-Key): replays the stored outcome without charging again, each
 * answer only after a sync that covers the row it reads. A repeat of an approved payment collects
 * it: the one place an approved row is signed.
 */

/**
 * Collects an approved payment. A paywall payment is signed only now: the challenge is probed
 * again (the one the human saw may have expired), and signed only if it still pays the same
 * recipient, token and chain no more than was approved, split exactly as approved (paywall.ts
 * sameOffer). A direct payment is approved only after
 * its signing at decision time failed or was cut off by a crash; it is signed from its stored
 * request (a raw transaction gets its nonce here). Either way the write transaction that starts
 * signing re-checks everything the human did not override (agent status, allowlist with the
 * fresh probe's attribution, network fee ceiling, cap without this payment's own hold; not the
 * threshold) and the collection window, like a direct approval is re-checked when decided.
 * Otherwise the approval cannot be used: 403 with the reason, and the hold is released.
 */
async function collectApproved(deps: AppDeps, row: PaymentRow, treasury: Address, keyId?: string): Promise<SignResult> {
  const paywall = isPaywallRequest(row.request);
  // An expired collection costs no probe.
  if (paywall && await expireCollectionIfDue(deps, row.id)) return replayPayment(deps, (await deps.store.payments.get(row.id))!, row.requestHash, treasury, keyId);
  const probed = paywall ? await probeApproved(deps, row) : undefined;
  const request = probed?.request ?? row.request;
  // A raw transaction's treasury balances are read beside its nonce floor and compared in the write (treasury.ts).
  const [nonceFloor, funds] = row.type === 'raw_transaction'
    ? await Promise.all([deps.submitter.nonceFloor(row.orgId, row.chainId, treasury), readFundsForSigning(deps, row.chainId, treasury)])
    : [undefined, undefined];
  const step = await deps.uow.write(async (tx) => {
    const { payments, agents } = tx;
    // The collecting key was checked when the repeat came in, which may be a paywall probe and
    // node reads ago: a revocation committed since (on any replica) binds this write.
    const key = keyId === undefined ? undefined : await tx.apiKeys.getForUse(keyId);
    if (keyId !== undefined && (!key || key.revokedAt !== null)) throw unauthenticated('Invalid or revoked API key');
    // The endpoint may have been taken out of the configuration since the approval: the row stays
    // approved, collectable once paypolicy can broadcast it again.
    if (row.type === 'raw_transaction') requireBroadcast(deps, key?.mode ?? 'live', row.chainId);
    const inTx = withinWrite(deps, tx);
    const now = deps.now();
    if (await expireCollectionIfDue(inTx, row.id)) return { kind: 'over' as const };
    if (probed && !sameOffer(probed.offer, probed.approved)) {
      const { offer, approved } = probed;
      const reason = !samePayees(offer, approved)
        ? `The paywall's split changed after approval (approved ${describePayees(offerPayees(approved))}; now ${describePayees(offerPayees(offer))}); send a new request`
        : !sameFeePayer(offer, approved)
          ? `The paywall's network fee sponsorship changed after approval (approved: ${feePayerText(approved)}; now: ${feePayerText(offer)}); send a new request`
          : `The paywall's offer changed after approval (now ${offer.amountMicros} micro-USD to ${offer.payTo} on chain ${offer.chainId}); send a new request`;
      return { kind: await payments.denyApproved(row.id, reason, now) ? 'denied' as const : 'over' as const, reason };
    }
    const agent = await agents.getForUse(row.agentId);
    if (!agent) return { kind: 'over' as const };
    // Within its collection window the approved row's hold is inside the cap window: count it
    // once, as this payment.
    const verdict = probed ? await recheckProbed(inTx, agent, row, probed) : await recheckApproved(inTx, agent, row, row.amountMicros);
    if (verdict.outcome !== 'allowed') {
      const reason = `Policy re-check at collection refused the approved payment: ${verdict.outcome === 'denied' ? verdict.reason : 'policy refused'}`;
      return { kind: await payments.denyApproved(row.id, reason, now) ? 'denied' as const : 'over' as const, reason };
    }
    // A treasury that cannot pay leaves the payment approved, for a repeat once it is topped up.
    if (row.type === 'raw_transaction') {
      const funded = await treasuryFundsVerdict(inTx, row.orgId, row.chainId, funds, { amountMicros: row.amountMicros, networkFee: storedNetworkFee(row.request) }, verdict);
      const unfunded = funded.outcome === 'denied' ? treasuryRefusal(funded) : undefined;
      if (unfunded) throw unfunded;
    }
    if (!await payments.startSigningFromApproved(row.id, request, now)) return { kind: 'over' as const };
    const floored = row.type === 'raw_transaction' && await deps.submitter.applyNonceFloor(payments, row.orgId, row.chainId, nonceFloor);
    const nonce = row.type === 'raw_transaction' ? await payments.allocateNonce(row.orgId, row.chainId, row.id) : undefined;
    return { kind: 'sign' as const, nonce, floored };
  });
  // Someone else moved the row first (a concurrent collection, the sweep): report what it is now.
  if (step.kind === 'over') return replayPayment(deps, (await deps.store.payments.get(row.id))!, row.requestHash, treasury, keyId);
  if (step.kind === 'denied') return { outcome: 'denied', agentId: row.agentId, transactionId: row.id, reason: step.reason, idempotent: true, rule: null };
  // Only once the floor is committed: the pair needs no more asking of the node.
  if (step.floored) deps.submitter.markNonceSynced(row.orgId, row.chainId);
  const signed = await signAndSettle(deps, row.id, row.orgId, treasury, request, step.nonce);
  return answerSigned(deps, { row, signed, idempotent: true });
}

type Probed = { offer: Offer; chain: readonly string[]; approved: Offer; request: string };

/** The approved paywall payment's challenge as the paywall answers now; `request` stores it. */
async function probeApproved(deps: AppDeps, row: PaymentRow): Promise<Probed> {
  const stored = JSON.parse(row.request) as StoredPaywallRequest;
  const { offer, chain } = await probeOffer(deps, row.orgId, stored.payload.resourceUrl, stored.payload.method);
  return { offer, chain, approved: offerFromJson(stored.offer), request: JSON.stringify({ ...stored, offer: offerToJson(offer) }) };
}

const storedRule = (row: PaymentRow): RuleInfo | null => (row.rule ? JSON.parse(row.rule) as RuleInfo : null);

/** Replays the stored outcome of an earlier request with the same key. */
export async function replayPayment(deps: AppDeps, row: PaymentRow, requestHash: string, treasury: Address, keyId?: string): Promise<SignResult> {
  if (row.requestHash !== requestHash) {
    throw new DomainError('conflict', 'Idempotency-Key was already used for a different request', { code: 'idempotency_key_reused' });
  }
  const base = { agentId: row.agentId, transactionId: row.id, idempotent: true };
  let current = row;
  if (current.status === 'pending_approval' && current.approvalId) {
    await expireIfDue(deps, current.approvalId);
    current = (await deps.store.payments.get(row.id))!;
  }
  // The row may have come from a group commit whose WAL sync is still running: answer only after
  // a sync that started after this read, so no replayed outcome is ahead of the disk.
  if (current.status !== 'approved') await deps.uow.durable();
  switch (current.status) {
    case 'signed':
      return allowedResult(current, JSON.parse(current.result!) as SignedPayment, true);
    case 'pending_approval':
      return { outcome: 'pending_approval', ...base, approvalRequestId: current.approvalId!, reason: current.reason, rule: storedRule(current) };
    case 'approved':
      return collectApproved(deps, current, treasury, keyId);
    case 'denied':
    case 'expired':
      // Only the policy's own denial has a rule: a person's denial or an expiry came later.
      return { outcome: 'denied', ...base, reason: current.reason, rule: current.status === 'denied' && current.approvalId === null ? storedRule(current) : null };
    case 'signing':
      throw new DomainError('conflict', 'This payment is still being signed; repeat the request shortly', { code: 'in_progress' });
    case 'reverted':
      // Signed and submitted, but nothing was paid on chain: the agent must not take it as paid.
      throw new DomainError('failed_precondition', `${current.reason || 'The transaction failed on chain'}; send a new request with a new Idempotency-Key`, {
        code: 'transaction_reverted', meta: { txHash: current.txHash },
      });
    default:
      throw new DomainError('failed_precondition', 'Signing this payment failed; send a new request with a new Idempotency-Key', { code: 'signing_failed' });
  }
}
