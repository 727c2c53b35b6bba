import type { Agent } from '../domain/types.js';
import type { AppDeps } from './deps.js';

/** The rolling window of the spend cap. */
export const CAP_WINDOW_MS = 24 * 3600 * 1000;

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
