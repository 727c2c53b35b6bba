import type { Agent } from '../../domain/types.js';
import { limitCovers, type LimitScope, type LimitUsage, type SpendLimit } from '../../domain/limits.js';
import type { PolicyFacts } from '../../domain/policy.js';
import type { AppDeps } from '../deps.js';

/** The rolling window of the spend cap. */
export const CAP_WINDOW_MS = 24 * 3600 * 1000;

/** The facts a use case knows besides the agent, the recipient, the amount and the ledger. */
export type MoreFacts = Partial<Pick<PolicyFacts, 'otherRecipients' | 'attributedSlug' | 'attributionNote' | 'networkFee' | 'maxAmountMicros'>> & {
  /** The ledger row of the payment being re-checked (an approved one): left out of every window, as it is the payment itself. */
  ownId?: string;
};
const NONE: MoreFacts = {};

/**
 * Policy facts for an agent as the store sees them now. Authoritative only inside the deciding
 * write transaction; outside it (pre-checks, quotes, dry runs) they are a snapshot. `more` is
 * passed in rather than spread over the result by the caller: V8 builds `{ ...facts, more }`
 * on a slow path, 1-3 µs each, and the sign path built four such objects per payment.
 */
export async function policyFacts(deps: AppDeps, agent: Agent, recipient: string, amountMicros: bigint, excludeMicros = 0n, more: MoreFacts = NONE): Promise<PolicyFacts> {
  const now = deps.now();
  const facts = factsOf(agent, recipient, amountMicros, (await committedNow(deps, agent.id, now)) - excludeMicros, more);
  facts.limits = await limitUsages(deps, agent, recipient, more.attributedSlug ?? null, more.otherRecipients ?? [], now, more.ownId ?? null);
  return facts;
}

const NO_LIMITS: readonly LimitUsage[] = [];

/**
 * The agent's and its organization's window limits that cover a payment to `recipient`, each
 * with what its window holds now, less the payment's own row when it is re-checked (`ownId`): it
 * is then the payment being judged, wherever its hold falls relative to each window.
 */
async function limitUsages(deps: AppDeps, agent: Agent, recipient: string, slug: string | null, others: readonly string[], now: number, ownId: string | null): Promise<readonly LimitUsage[]> {
  const org = await deps.store.organizations.get(agent.orgId);
  const agentLimits = agent.policy.limits;
  const orgLimits = org?.limits ?? [];
  if (agentLimits.length === 0 && orgLimits.length === 0) return NO_LIMITS;
  const covering: Array<{ scope: LimitScope; limit: SpendLimit }> = [];
  for (const limit of agentLimits) if (limitCovers(limit, recipient, slug, others)) covering.push({ scope: 'agent', limit });
  for (const limit of orgLimits) if (limitCovers(limit, recipient, slug, others)) covering.push({ scope: 'organization', limit });
  if (covering.length === 0) return NO_LIMITS;
  const uses = await deps.store.payments.windowUses({
    orgId: agent.orgId, now, excludeId: ownId,
    windows: covering.map(({ scope, limit }) => ({ agentId: scope === 'agent' ? agent.id : null, recipient: limit.recipient, since: now - limit.windowMs })),
  });
  return covering.map(({ scope, limit }, i) => ({ scope, limit, use: { micros: uses[i]!.micros, count: uses[i]!.count, feeWei: uses[i]!.feeGwei * 1_000_000_000n } }));
}

/** Every field written out in one literal (see policyFacts). */
function factsOf(agent: Agent, recipient: string, amountMicros: bigint, committedMicros: bigint, more: MoreFacts): PolicyFacts {
  return {
    agentStatus: agent.status, allowlist: agent.policy.allowlist, spendCapMicros: agent.policy.spendCapMicros,
    approvalThresholdMicros: agent.policy.approvalThresholdMicros, recipient, attributedSlug: more.attributedSlug ?? null,
    amountMicros, maxNetworkFeeWei: agent.policy.maxNetworkFeeWei, maxPerPaymentMicros: agent.policy.maxPerPaymentMicros, committedMicros,
    otherRecipients: more.otherRecipients, attributionNote: more.attributionNote, networkFee: more.networkFee, maxAmountMicros: more.maxAmountMicros,
  };
}

/**
 * The ledger's committed sum for an agent, remembered per store for the advisory pre-check of
 * sign (decide.ts), which only chooses between signing before the deciding write and reserving
 * first: a stale value costs a dropped signature or a second write, never a wrong decision, since
 * the deciding write always reads the ledger itself. Saves one of the two cap queries per payment.
 */
const snapshots = new WeakMap<object, Map<string, { committed: bigint; at: number }>>();
/** The key of one running app's snapshots: its sign requests in flight (signsInFlight.ts), which every withinWrite view of its deps shares. */
const snapshotKey = (deps: AppDeps): object => deps.inflight;

/** How long a remembered committed sum is used for the advisory pre-check. */
export const CAP_SNAPSHOT_MS = 1_000;

async function committedNow(deps: AppDeps, agentId: string, now: number): Promise<bigint> {
  const committed = await deps.store.payments.committedSince(agentId, now - CAP_WINDOW_MS, now);
  let byAgent = snapshots.get(snapshotKey(deps));
  if (!byAgent) snapshots.set(snapshotKey(deps), (byAgent = new Map()));
  byAgent.set(agentId, { committed, at: now });
  return committed;
}

/**
 * policyFacts for the advisory pre-check only: the committed sum is the one the last exact read
 * for this agent saw, plus nothing, when it is younger than CAP_SNAPSHOT_MS; otherwise exact.
 * Never use it for a decision that is recorded or answered.
 */
export async function advisoryPolicyFacts(deps: AppDeps, agent: Agent, recipient: string, amountMicros: bigint, more: MoreFacts = NONE): Promise<PolicyFacts> {
  const now = deps.now();
  const snap = snapshots.get(snapshotKey(deps))?.get(agent.id);
  if (!snap || now - snap.at > CAP_SNAPSHOT_MS || now < snap.at) return policyFacts(deps, agent, recipient, amountMicros, 0n, more);
  return factsOf(agent, recipient, amountMicros, snap.committed, more);
}
