import { hash } from 'node:crypto';
import type { Address } from 'viem';
import { checksumAddress } from '../../domain/address.js';
import { DomainError, IDEMPOTENCY_KEY_TAKEN } from '../../domain/errors.js';
import { evaluatePolicy } from '../../domain/policy.js';
import { canonicalRequest, parsePaymentRequest, type PaymentRequest, type PaymentRequestInput } from '../../domain/paymentRequest.js';
import type { Agent, ApiKeyPrincipal } from '../../domain/types.js';
import { checkUrl } from '../../paywalls/safeFetch.js';
import { requireAgentInOrg } from '../organizations/agents.js';
import type { AppDeps } from '../deps.js';
import { decide, readChain } from './decide.js';
import { intentFacts, resolveIntent } from './intent.js';
import { replayPayment } from './replay.js';
import { allowedResult, answerSigned, signAndSettle, type SignResult } from './settle.js';
import { requireBroadcast } from './signatures.js';

export type { SignResult } from './settle.js';
export type { Intent } from './intent.js';
export type { Decision } from './decide.js';
export type { Signed } from './settle.js';

/**
 * POST /api/sign and PaymentPolicyService.Sign as one pipeline of typed stages, each a function
 * from one value to the next, each in its own module:
 *
 *   PaymentRequest  validated and scoped here (domain/paymentRequest.ts, the key's organization)
 *   → Intent        what is paid: the request, or a paywall's live challenge (intent.ts resolveIntent)
 *   → Decision      the policy's outcome, recorded with its hold in one durable write (decide.ts decide)
 *   → Signed        the signature, once the row accounting for it is durably `signed` (settle.ts)
 *   → SignResult    broadcast of a raw transaction through deps.submitter, then the answer (settle.ts)
 *
 * Authorizations are signed just before the deciding write (after a read-only check) and kept only
 * if it allows them; raw transactions are reserved first and signed after. No signature leaves
 * before its commit is durable. A repeat of (agent, Idempotency-Key) replays the stored outcome
 * without charging again (replay.ts); concurrent duplicates are serialized by deps.inflight.
 */
export async function signPayment(deps: AppDeps, principal: ApiKeyPrincipal, input: PaymentRequestInput): Promise<SignResult> {
  const req = parsePaymentRequest(input, principal.mode);
  const agent = await requireAgentInOrg(deps, principal.orgId, req.agentId);
  const treasury = treasuryOf(deps, principal.orgId);
  if (req.payload.kind === 'paywall') checkUrl(req.payload.resourceUrl, deps.probe);
  if (req.dryRun) {
    if (req.type === 'raw_transaction') requireBroadcast(deps, principal.mode, req.chainId);
    const intent = await resolveIntent(deps, principal, agent, req);
    const verdict = evaluatePolicy(await intentFacts(deps, agent, intent));
    return { outcome: 'dry_run', agentId: agent.id, verdict, type: req.type, chainId: intent.chainId, recipient: checksumAddress(intent.recipient), amountMicros: intent.amountMicros };
  }
  const requestHash = hash('sha256', canonicalRequest(req), 'hex');
  const key = req.idempotencyKey;
  if (key === undefined) return newPayment(deps, principal, agent, req, requestHash, treasury);
  // The lookup runs inside the registered request, so duplicates cannot slip in before it.
  return deps.inflight.run(agent.id, key, async () => {
    const existing = (await deps.store.payments.findByIdempotencyKey(agent.id, key)) ?? (await deps.store.payments.findKeylessById(agent.id, key));
    if (existing) return replayPayment(deps, existing, requestHash, treasury, principal.keyId);
    try {
      return await newPayment(deps, principal, agent, req, requestHash, treasury);
    } catch (err) {
      // Another replica on the same PostgreSQL recorded this key first (deps.inflight only sees
      // this process): nothing of ours was written; answer the winner's outcome.
      if (!(err instanceof DomainError && err.code === IDEMPOTENCY_KEY_TAKEN)) throw err;
      const winner = await deps.store.payments.findByIdempotencyKey(agent.id, key);
      if (!winner) throw err;
      return replayPayment(deps, winner, requestHash, treasury, principal.keyId);
    }
  });
}

function treasuryOf(deps: AppDeps, orgId: string): Address {
  const address = deps.vault.address(orgId);
  if (!address) throw new DomainError('treasury_unavailable', 'Organization treasury not provisioned', { code: 'treasury_not_provisioned' });
  return address as Address;
}

/**
 * A new payment through the stages. Deciding, signing and settling run in a slot of the bounded
 * signing stage: beyond it the payment is refused (503 overloaded) before anything is signed or
 * written; the slot is held until the outcome is settled.
 */
async function newPayment(deps: AppDeps, principal: ApiKeyPrincipal, agent: Agent, req: PaymentRequest, requestHash: string, treasury: Address): Promise<SignResult> {
  if (req.type === 'raw_transaction') requireBroadcast(deps, principal.mode, req.chainId);
  const intent = await resolveIntent(deps, principal, agent, req);
  const readings = await readChain(deps, principal.orgId, intent, treasury);
  const release = deps.signer.admit(principal.orgId);
  const deadline = performance.now() + deps.signer.maxQueueMs;
  try {
    const decision = await decide(deps, principal, agent, req, requestHash, treasury, intent, readings, deadline);
    const { row } = decision;
    switch (decision.outcome) {
      case 'denied':
        return { outcome: 'denied', agentId: agent.id, transactionId: row.id, reason: decision.reason, idempotent: false, rule: decision.rule };
      case 'pending_approval':
        return { outcome: 'pending_approval', agentId: agent.id, transactionId: row.id, approvalRequestId: decision.approvalId, reason: decision.reason, idempotent: false, rule: decision.rule };
      case 'signed':
        return allowedResult(row, decision.signed, false);
      case 'reserved': {
        const signed = await signAndSettle(deps, row.id, principal.orgId, treasury, row.request, decision.nonce);
        return await answerSigned(deps, { row, signed, idempotent: false });
      }
    }
  } finally {
    release();
  }
}
