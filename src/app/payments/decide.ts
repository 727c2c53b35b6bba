import type { Address } from 'viem';
import { MAX_USD_MICROS } from '../../domain/money.js';
import { evaluatePolicy } from '../../domain/policy.js';
import type { PaymentRequest } from '../../domain/paymentRequest.js';
import type { Agent, ApiKeyPrincipal } from '../../domain/types.js';
import { shedIfLate } from '../../overload/admission.js';
import { unauthenticated } from '../accounts/auth/credentials.js';
import { newUuid } from '../../store/ids.js';
import type { InitialState } from '../../domain/transactionState.js';
import type { PaymentRow } from '../../store/payments.js';
import type { AppDeps } from '../deps.js';
import { intentFacts, resolveIntent, type Intent } from './intent.js';
import { signAndSettle, signOrFail } from './settle.js';
import type { SignedPayment } from './signedPayment.js';
import { allowedResult, type SignResult } from './signResult.js';
import { applyNonceFloor, broadcastSettled, chainNonceFloor, markNonceSynced, requireBroadcast } from '../submission/submit.js';
import { withinWrite } from '../withinWrite.js';
import { readFundsForSigning, treasuryFundsVerdict, type FundsReading } from '../organizations/treasury.js';

/**
 * A new payment: resolve what is to be paid, then decide in one serialized write transaction
 * that evaluates the agent's policy and records the outcome with its hold on the cap (the row's
 * first state, domain/transactionState.ts). The signing stage is bounded: beyond it the payment
 * is refused (503 overloaded) before anything is signed or written; the slot is held until the
 * outcome is settled. A payment that waited in the stage longer than `maxQueueMs` (for a signing
 * thread, or for its turn in the write queue) is refused the same way when its decision would be
 * written, so under overload it is shed rather than answered late; a signature made for it is
 * dropped unseen.
 */
export async function decidePayment(deps: AppDeps, principal: ApiKeyPrincipal, agent: Agent, req: PaymentRequest, requestHash: string, treasury: Address): Promise<SignResult> {
  if (req.type === 'raw_transaction') requireBroadcast(deps, principal.mode, req.chainId);
  const intent = await resolveIntent(deps, principal, agent, req);
  // A raw transaction's first reservation on a chain with an endpoint starts from the node's
  // pending nonce; asked before the signing stage, so a slow node is not counted as queueing.
  // Its treasury's balances are read beside it (treasury.ts), compared inside the reserving write.
  const [nonceFloor, funds] = intent.needsNonce
    ? await Promise.all([chainNonceFloor(deps, principal.orgId, intent.chainId, treasury), readFundsForSigning(deps, intent.chainId, treasury)])
    : [undefined, undefined];
  const release = deps.signer.admit(principal.orgId);
  const deadline = performance.now() + deps.signer.maxQueueMs;
  try {
    return await decide(deps, principal, agent, req, requestHash, treasury, intent, deadline, nonceFloor, funds);
  } finally {
    release();
  }
}

async function decide(
  deps: AppDeps, principal: ApiKeyPrincipal, agent: Agent, req: PaymentRequest, requestHash: string, treasury: Address, intent: Intent, deadline: number,
  nonceFloor: number | undefined, funds: FundsReading | undefined,
): Promise<SignResult> {
  // Authorizations and paywall payments do not depend on ledger state, so when a read-only check
  // says the payment will pass they are signed first and recorded in the same commit as the
  // decision: one durable write per payment. If the decision changes in between (a concurrent
  // payment took the headroom), the signature is dropped unseen. Raw transactions need an account
  // nonce from the ledger, so they are reserved first and signed after.
  let presigned: SignedPayment | undefined;
  if (!intent.needsNonce && evaluatePolicy(await intentFacts(deps, agent, intent, true)).outcome === 'allowed') {
    presigned = await signOrFail(deps, principal.orgId, treasury, intent.stored);
  }

  const reserved = await deps.uow.write(async (tx) => {
    // Thrown before any insert: the transaction's savepoint rolls back empty.
    shedIfLate(deadline);
    const { payments, approvals, agents, organizations } = tx;
    // The key was checked when the request came in, which may be a whole signing queue ago: a
    // revocation committed since (on any replica) binds this write, as the agent's status does.
    const key = await tx.apiKeys.getForUse(principal.keyId);
    if (!key || key.revokedAt !== null) throw unauthenticated('Invalid or revoked API key');
    const inTx = withinWrite(deps, tx);
    const current = (await agents.getForUse(agent.id)) ?? agent;
    const now = deps.now();
    const facts = await intentFacts(inTx, current, intent);
    const verdict = await treasuryFundsVerdict(inTx, principal.orgId, intent.chainId, funds, intent, evaluatePolicy(facts));
    const row: Omit<PaymentRow, 'status'> = {
      id: newUuid(), orgId: principal.orgId, agentId: agent.id, type: req.type, chainId: intent.chainId,
      // A price beyond what the ledger records is denied (domain/policy.ts); its row keeps the
      // largest amount it can hold, and the reason the real one.
      recipient: intent.recipient, amountMicros: intent.amountMicros > MAX_USD_MICROS ? MAX_USD_MICROS : intent.amountMicros, reason: '', serviceSlug: facts.attributedSlug ?? '',
      resourceUrl: intent.resourceUrl, idempotencyKey: req.idempotencyKey ?? null, requestHash, request: intent.stored, result: null,
      approvalId: null, createdAt: now,
    };
    if (verdict.outcome === 'denied') {
      await payments.insert(withState(row, 'denied', verdict.reason, null, null));
      return { verdict, row };
    }
    if (verdict.outcome === 'pending_approval') {
      const approvalId = newUuid();
      const windowMs = (await organizations.get(principal.orgId))!.approvalWindowSeconds * 1000;
      const pending = withState(row, 'pending_approval', verdict.reason, null, approvalId);
      await payments.insert(pending);
      await approvals.insert({
        id: approvalId, orgId: principal.orgId, agentId: agent.id, transactionId: row.id, status: 'pending', createdAt: now,
        expiresAt: now + windowMs, decidedAt: null, decidedBy: '', note: '',
      });
      return { verdict, row: pending };
    }
    if (presigned) {
      await payments.insert(withState(row, 'signed', row.reason, JSON.stringify(presigned), null));
      return { verdict, row, signed: presigned };
    }
    await payments.insert(withState(row, 'signing', row.reason, null, null));
    const floored = intent.needsNonce && await applyNonceFloor(inTx, principal.orgId, intent.chainId, nonceFloor);
    const nonce = intent.needsNonce ? await payments.allocateNonce(principal.orgId, intent.chainId, row.id) : undefined;
    return { verdict, row, nonce, floored };
  });
  // Only once the floor is committed: the pair needs no more asking of the node.
  if (reserved.floored) markNonceSynced(deps, principal.orgId, intent.chainId);
  const { verdict, row } = reserved;
  if (verdict.outcome === 'denied') return { outcome: 'denied', agentId: agent.id, transactionId: row.id, reason: verdict.reason, idempotent: false };
  if (verdict.outcome === 'pending_approval') {
    return { outcome: 'pending_approval', agentId: agent.id, transactionId: row.id, approvalRequestId: row.approvalId!, reason: verdict.reason, idempotent: false };
  }
  if (reserved.signed) return allowedResult(row, reserved.signed, false);
  const signed = await signAndSettle(deps, row.id, principal.orgId, treasury, row.request, reserved.nonce);
  // After the settling commit is durable, never before: broadcast, bounded by the RPC timeout.
  return allowedResult(row, signed, false, await broadcastSettled(deps, row.id, signed));
}

/**
 * The row in its first state, every field written out: V8 builds `{ ...row, status, … }` on a
 * slow path (about 1.5 µs per payment for this 17-field row).
 */
function withState(row: Omit<PaymentRow, 'status'>, status: InitialState, reason: string, result: string | null, approvalId: string | null): PaymentRow & { status: InitialState } {
  return {
    id: row.id, orgId: row.orgId, agentId: row.agentId, type: row.type, status, chainId: row.chainId, recipient: row.recipient,
    amountMicros: row.amountMicros, reason, serviceSlug: row.serviceSlug, resourceUrl: row.resourceUrl, idempotencyKey: row.idempotencyKey,
    requestHash: row.requestHash, request: row.request, result, approvalId, createdAt: row.createdAt,
  };
}
