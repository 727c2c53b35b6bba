import type { Agent } from '../domain/types.js';
import type { AppDeps } from './deps.js';

/** The rolling window of the spend cap. */
export const CAP_WINDOW_MS = 24 * 3600 * 1000;

/**
 * Policy facts for an agent as the store sees them now. Authoritative only inside the deciding
 * write transaction; outside it (pre-checks, quotes, dry runs) they are a snapshot.
 */
export async function policyFacts(deps: AppDeps, agent: Agent, recipient: string, amountMicros: bigint, excludeMicros = 0n) {
  const now = deps.now();
  return { ...policyFacts0(agent, recipient, amountMicros), committedMicros: (await committedNow(deps, agent.id, now)) - excludeMicros };
}

function policyFacts0(agent: Agent, recipient: string, amountMicros: bigint) {
  return {
    agentStatus: agent.status, allowlist: agent.policy.allowlist, spendCapMicros: agent.policy.spendCapMicros,
    approvalThresholdMicros: agent.policy.approvalThresholdMicros, recipient, attributedSlug: null as string | null,
    amountMicros, maxNetworkFeeWei: agent.policy.maxNetworkFeeWei,
  };
}

/**
 * The ledger's committed sum for an agent, remembered per store for the advisory pre-check of
 * sign (decide.ts), which only chooses between signing before the deciding write and reserving
 * first: a stale value costs a dropped signature or a second write, never a wrong decision, since
 * the deciding write always reads the ledger itself. Saves one of the two cap queries per payment.
 */
const snapshots = new WeakMap<object, Map<string, { committed: bigint; at: number }>>();
/** The key of one running app's snapshots: its in-flight map, which every withinWrite view of its deps shares. */
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
export async function advisoryPolicyFacts(deps: AppDeps, agent: Agent, recipient: string, amountMicros: bigint) {
  const now = deps.now();
  const snap = snapshots.get(snapshotKey(deps))?.get(agent.id);
  if (!snap || now - snap.at > CAP_SNAPSHOT_MS || now < snap.at) return policyFacts(deps, agent, recipient, amountMicros);
  return { ...policyFacts0(agent, recipient, amountMicros), committedMicros: snap.committed };
}
