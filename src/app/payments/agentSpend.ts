import type { LimitScope, SpendLimit } from '../../domain/limits.js';
import type { Agent, ApiKeyPrincipal } from '../../domain/types.js';
import type { StoreTables } from '../../store/port.js';
import type { AppDeps } from '../deps.js';
import { requireAgentInOrg } from '../organizations/agents.js';
import { CAP_WINDOW_MS } from './policyFacts.js';

/** What an agent may still spend, counted exactly as the next policy check will count it. */
export type AgentSpendStatus = {
  agentId: string;
  agentName: string;
  status: Agent['status'];
  /** The rolling window of the cap, in milliseconds (24 hours). */
  windowMs: number;
  spendCapMicros: bigint;
  /** Signed, being signed, approved and pending payments inside the window. */
  committedMicros: bigint;
  /** Cap minus committed, never below zero. */
  remainingMicros: bigint;
  approvalThresholdMicros: bigint;
  /** The instant the window ends at (epoch milliseconds). */
  asOf: number;
  /** Every limit: the spend cap first, then the agent's window limits, then its organization's. */
  limits: LimitStatus[];
};

/** One limit and what its window holds now. */
export type LimitStatus = { scope: LimitScope; limit: SpendLimit; micros: bigint; count: number; feeWei: bigint };

/** A limit's window to measure: the agent's own rows for its scope, the organization's for the organization's. */
function windowOf(agent: Agent, scope: LimitScope, limit: SpendLimit, now: number) {
  return { agentId: scope === 'agent' ? agent.id : null, recipient: limit.recipient, since: now - limit.windowMs };
}

/**
 * The organization's limits with what their windows hold at `now`: the same for every agent of
 * it, so a page of many agents measures them once (limitStatuses' `orgStatuses`).
 */
export async function orgLimitStatuses(tables: Pick<StoreTables, 'payments'>, orgId: string, orgLimits: readonly SpendLimit[], now: number): Promise<LimitStatus[]> {
  if (orgLimits.length === 0) return [];
  const uses = await tables.payments.windowUses({ orgId, now, windows: orgLimits.map((l) => ({ agentId: null, recipient: l.recipient, since: now - l.windowMs })) });
  return orgLimits.map((limit, i) => ({ scope: 'organization', limit, micros: uses[i]!.micros, count: uses[i]!.count, feeWei: uses[i]!.feeGwei * 1_000_000_000n }));
}

/**
 * Every limit of an agent with what its window holds at `now`: the spend cap first (summed as the
 * policy check sums it), then the agent's window limits, then its organization's (measured here,
 * or given as `orgStatuses`). `tables` is committed data or one read's snapshot; the caller has
 * checked the principal's scope.
 */
export async function limitStatuses(
  tables: Pick<StoreTables, 'payments'>, agent: Agent, orgLimits: readonly SpendLimit[], now: number, orgStatuses?: readonly LimitStatus[],
): Promise<LimitStatus[]> {
  // The same sum the policy check uses (overdue approvals no longer hold the cap).
  const committed = await tables.payments.committedSince(agent.id, now - CAP_WINDOW_MS, now);
  const capLimit: SpendLimit = { window: '24h', windowMs: CAP_WINDOW_MS, maxMicros: agent.policy.spendCapMicros, maxCount: null, maxNetworkFeeWei: null, recipient: null };
  const own: Array<{ scope: LimitScope; limit: SpendLimit }> = [
    { scope: 'agent', limit: capLimit }, ...agent.policy.limits.map((limit) => ({ scope: 'agent' as const, limit })),
    ...(orgStatuses ? [] : orgLimits.map((limit) => ({ scope: 'organization' as const, limit }))),
  ];
  const uses = await tables.payments.windowUses({ orgId: agent.orgId, now, windows: own.map(({ scope, limit }) => windowOf(agent, scope, limit, now)) });
  const measured = own.map(({ scope, limit }, i): LimitStatus => ({
    scope, limit, micros: i === 0 ? committed : uses[i]!.micros, count: uses[i]!.count, feeWei: uses[i]!.feeGwei * 1_000_000_000n,
  }));
  return orgStatuses ? [...measured, ...orgStatuses] : measured;
}

/**
 * GET /api/agents/{id}/spend (an extension beyond the wire protocol): an agent's own remaining
 * budget, for the API key of its organization. Another organization's agent is the same 404 as
 * an unknown id. A snapshot: the deciding check runs again, atomically, when the agent signs.
 */
export async function getAgentSpend(deps: AppDeps, principal: ApiKeyPrincipal, agentId: string): Promise<AgentSpendStatus> {
  const agent = await requireAgentInOrg(deps, principal.orgId, agentId);
  const now = deps.now();
  const org = await deps.store.organizations.get(agent.orgId);
  const limits = await limitStatuses(deps.store, agent, org?.limits ?? [], now);
  const cap = agent.policy.spendCapMicros;
  const committed = limits[0]!.micros;
  return {
    agentId: agent.id, agentName: agent.name, status: agent.status, windowMs: CAP_WINDOW_MS,
    spendCapMicros: cap, committedMicros: committed, remainingMicros: cap > committed ? cap - committed : 0n,
    approvalThresholdMicros: agent.policy.approvalThresholdMicros, asOf: now, limits,
  };
}
