import { hash } from 'node:crypto';
import type { Address } from 'viem';
import { checksumAddress } from '../../domain/address.js';
import { DomainError, IDEMPOTENCY_KEY_TAKEN } from '../../domain/errors.js';
import { evaluatePolicy } from '../../domain/policy.js';
import { canonicalRequest, parsePaymentRequest, type PaymentRequestInput } from '../../domain/paymentRequest.js';
import type { ApiKeyPrincipal } from '../../domain/types.js';
import { checkUrl } from '../../paywalls/safeFetch.js';
import { requireAgentInOrg } from '../organizations/agents.js';
import { decidePayment } from './decide.js';
import type { AppDeps } from '../deps.js';
import { intentFacts, resolveIntent } from './intent.js';
import { replayPayment } from './replay.js';
import { requireBroadcast } from '../submission/submit.js';
import type { SignResult } from './signResult.js';

export type { SignResult } from './signResult.js';
export { CAP_WINDOW_MS, policyFacts } from './policyFacts.js';

/**
 * The entry of a payment request: validation, dry runs, and idempotency (one payment per
 * (agent, Idempotency-Key)). New payments are decided in decide.ts (intent.ts resolves what is
 * paid, settle.ts signs and settles), repeats are answered by replay.ts.
 */

function treasuryOf(deps: AppDeps, orgId: string): Address {
  const address = deps.vault.address(orgId);
  if (!address) throw new DomainError('treasury_unavailable', 'Organization treasury not provisioned', { code: 'treasury_not_provisioned' });
  return address as Address;
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
  if (key === undefined) return decidePayment(deps, principal, agent, req, requestHash, treasury);

  const slot = `${agent.id}\u0000${key}`;
  for (let running = deps.inflight.get(slot); running; running = deps.inflight.get(slot)) {
    await running.catch(() => undefined);
  }
  // The lookup runs inside the promise registered here, with no await before the registration:
  // duplicates cannot slip in between.
  const running = (async () => {
    const existing = (await deps.store.payments.findByIdempotencyKey(agent.id, key)) ?? (await deps.store.payments.findKeylessById(agent.id, key));
    if (existing) return replayPayment(deps, existing, requestHash, treasury, principal.keyId);
    try {
      return await decidePayment(deps, principal, agent, req, requestHash, treasury);
    } catch (err) {
      // Another replica on the same PostgreSQL recorded this key first (the in-flight map above
      // only sees this process): nothing of ours was written; answer the winner's outcome.
      if (!(err instanceof DomainError && err.code === IDEMPOTENCY_KEY_TAKEN)) throw err;
      const winner = await deps.store.payments.findByIdempotencyKey(agent.id, key);
      if (!winner) throw err;
      return replayPayment(deps, winner, requestHash, treasury, principal.keyId);
    }
  })();
  deps.inflight.set(slot, running);
  try {
    return await running;
  } finally {
    if (deps.inflight.get(slot) === running) deps.inflight.delete(slot);
  }
}
