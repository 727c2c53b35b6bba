import type { Address } from 'viem';
import { MAX_USD_MICROS } from '../../domain/money.js';
import { evaluatePolicy, type RuleInfo } from '../../domain/policy.js';
import type { PaymentRequest } from '../../domain/paymentRequest.js';
import type { Agent, ApiKeyPrincipal } from '../../domain/types.js';
import { shedIfLate } from '../../overload/admission.js';
import { unauthenticated } from '../accounts/auth/credentials.js';
import { newUuid } from '../../store/ids.js';
import type { InitialState } from '../../domain/transactionState.js';
import type { PaymentRow } from '../../store/port.js';
import type { AppDeps } from '../deps.js';
import { intentFacts, type Intent } from './intent.js';
import { signOrFail } from './settle.js';
import type { SignedPayment } from './signatures.js';
import { withinWrite } from '../withinWrite.js';
import { feeGweiOf } from '../../domain/networkFee.js';
import { readFundsForSigning, treasuryFundsVerdict, type FundsReading } from './funds.js';

/**
 * The pipeline's decide stage (pipeline.ts): an Intent becomes a Decision in one serialized,
 * durable write that evaluates the agent's policy and records the outcome with its hold on the cap
 * (the row's first state, domain/transactionState.ts).
 */

/** What the deciding write recorded; `row` is the payment's row as inserted. */
export type Decision =
  | { outcome: 'denied'; row: PaymentRow; reason: string; rule: RuleInfo }
  | { outcome: 'pending_approval'; row: PaymentRow; reason: string; approvalId: string; rule: RuleInfo }
  /** Signed before the write and recorded in it as `signed`: the signature may leave now. */
  | { outcome: 'signed'; row: PaymentRow; signed: SignedPayment }
  /** Recorded as `signing` (a raw transaction with its nonce): signed and settled after (settle.ts). */
  | { outcome: 'reserved'; row: PaymentRow; nonce: number | undefined };

/** What the node says before a raw transaction's deciding write: the nonce floor and the treasury's funds. */
export type ChainReadings = { nonceFloor: number | undefined; funds: FundsReading | undefined };

const NO_READINGS: ChainReadings = { nonceFloor: undefined, funds: undefined };

/**
 * A raw transaction's first reservation on a chain with an endpoint starts from the node's pending
 * nonce; asked before the signing stage, so a slow node is not counted as queueing. Its treasury's
 * balances are read beside it (funds.ts), compared inside the deciding write.
 */
export async function readChain(deps: AppDeps, orgId: string, intent: Intent, treasury: Address): Promise<ChainReadings> {
  if (!intent.needsNonce) return NO_READINGS;
  const [nonceFloor, funds] = await Promise.all([deps.submitter.nonceFloor(orgId, intent.chainId, treasury), readFundsForSigning(deps, intent.chainId, treasury)]);
  return { nonceFloor, funds };
}

/**
 * Decides a new payment, inside the signing stage the caller holds. A payment that waited in the
 * stage longer than `deadline` (for a signing thread, or for its turn in the write queue) is
 * refused (503 overloaded) when its decision would be written, so under overload it is shed rather
 * than answered late; a signature made for it is dropped unseen.
 */
export async function decide(
  deps: AppDeps, principal: ApiKeyPrincipal, agent: Agent, req: PaymentRequest, requestHash: string, treasury: Address, intent: Intent,
  readings: ChainReadings, deadline: number,
): Promise<Decision> {
  // Authorizations and paywall payments do not depend on ledger state, so when a read-only check
  // says the payment will pass they are signed first and recorded in the same commit as the
  // decision: one durable write per payment. If the decision changes in between (a concurrent
  // payment took the headroom), the signature is dropped unseen. Raw transactions need an account
  // nonce from the ledger, so they are reserved first and signed after.
  let presigned: SignedPayment | undefined;
  if (!intent.needsNonce && evaluatePolicy(await intentFacts(deps, agent, intent, true)).outcome === 'allowed') {
    presigned = await signOrFail(deps, principal.orgId, treasury, intent.stored);
  }

  const decided = await deps.uow.write(async (tx): Promise<Decision & { floored?: boolean }> => {
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
    const policy = evaluatePolicy(facts);
    // Only a raw transaction on a chain with an endpoint has a funds reading to compare.
    const verdict = readings.funds ? await treasuryFundsVerdict(inTx, principal.orgId, intent.chainId, readings.funds, intent, policy) : policy;
    const row: Omit<PaymentRow, 'status'> = {
      id: newUuid(), orgId: principal.orgId, agentId: agent.id, type: req.type, chainId: intent.chainId,
      // A price beyond what the ledger records is denied (domain/policy.ts); its row keeps the
      // largest amount it can hold, and the reason the real one.
      recipient: intent.recipient, amountMicros: intent.amountMicros > MAX_USD_MICROS ? MAX_USD_MICROS : intent.amountMicros, reason: '', serviceSlug: facts.attributedSlug ?? '',
      resourceUrl: intent.resourceUrl, idempotencyKey: req.idempotencyKey ?? null, requestHash, request: intent.stored, result: null,
      approvalId: null, createdAt: now, feeGwei: feeGweiOf(intent.networkFee), policyVersion: current.policy.version ?? null, splitRecipients: intent.otherRecipients,
    };
    if (verdict.outcome === 'denied') {
      const denied = withState(row, 'denied', verdict.reason, null, null, verdict.info);
      await payments.insert(denied);
      return { outcome: 'denied', row: denied, reason: verdict.reason, rule: verdict.info };
    }
    if (verdict.outcome === 'pending_approval') {
      const approvalId = newUuid();
      const windowMs = (await organizations.get(principal.orgId))!.approvalWindowSeconds * 1000;
      const pending = withState(row, 'pending_approval', verdict.reason, null, approvalId, verdict.rule);
      await payments.insert(pending);
      await approvals.insert({
        id: approvalId, orgId: principal.orgId, agentId: agent.id, transactionId: row.id, status: 'pending', createdAt: now,
        expiresAt: now + windowMs, decidedAt: null, decidedBy: '', note: '',
      });
      return { outcome: 'pending_approval', row: pending, reason: verdict.reason, approvalId, rule: verdict.rule };
    }
    if (presigned) {
      const signed = withState(row, 'signed', row.reason, JSON.stringify(presigned), null);
      await payments.insert(signed);
      return { outcome: 'signed', row: signed, signed: presigned };
    }
    const signing = withState(row, 'signing', row.reason, null, null);
    await payments.insert(signing);
    const floored = intent.needsNonce && await deps.submitter.applyNonceFloor(payments, principal.orgId, intent.chainId, readings.nonceFloor);
    const nonce = intent.needsNonce ? await payments.allocateNonce(principal.orgId, intent.chainId, row.id) : undefined;
    return { outcome: 'reserved', row: signing, nonce, floored };
  });
  // Only once the floor is committed: the pair needs no more asking of the node.
  if (decided.floored) deps.submitter.markNonceSynced(principal.orgId, intent.chainId);
  return decided;
}

/**
 * The row in its first state, every field written out: V8 builds `{ ...row, status, … }` on a
 * slow path (about 1.5 µs per payment for this 17-field row).
 */
function withState(
  row: Omit<PaymentRow, 'status'>, status: InitialState, reason: string, result: string | null, approvalId: string | null, rule: RuleInfo | null = null,
): PaymentRow & { status: InitialState } {
  return {
    id: row.id, orgId: row.orgId, agentId: row.agentId, type: row.type, status, chainId: row.chainId, recipient: row.recipient,
    amountMicros: row.amountMicros, reason, serviceSlug: row.serviceSlug, resourceUrl: row.resourceUrl, idempotencyKey: row.idempotencyKey,
    requestHash: row.requestHash, request: row.request, result, approvalId, createdAt: row.createdAt, feeGwei: row.feeGwei, policyVersion: row.policyVersion, splitRecipients: row.splitRecipients,
    rule: rule && JSON.stringify(rule),
  };
}
