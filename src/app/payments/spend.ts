import type { Agent, Principal } from '../../domain/types.js';
import type { AppDeps } from '../deps.js';
import { listAgents } from '../organizations/agents.js';
import { limitStatuses, orgLimitStatuses, type LimitStatus } from './agentSpend.js';
import { sweepExpiredApprovals } from './expiry.js';
import { CAP_WINDOW_MS } from './policyFacts.js';

const HOUR_MS = 3600_000;
const DAY_MS = 24 * HOUR_MS;

export type AgentSpend = {
  agent: Agent;
  /** What counts against the cap right now: the rolling 24 hours, micro-USD. */
  last24hMicros: bigint;
  last7dMicros: bigint;
  /** 24 hourly sums, oldest first; the last ends now. */
  hourly: bigint[];
  /** 7 daily sums (rolling 24-hour days ending now), oldest first. */
  daily: bigint[];
  /** Every limit with what its window holds, as the agent's spend read gives them (agentSpend.ts). */
  limits: LimitStatus[];
};

export type SpendSummary = {
  /** The instant every window ends at. */
  now: number;
  agents: AgentSpend[];
  totals: { last24hMicros: bigint; last7dMicros: bigint; daily: bigint[]; capMicros: bigint };
};

function sum(values: readonly bigint[]): bigint {
  return values.reduce((a, b) => a + b, 0n);
}

/**
 * An organization's spend per agent over the last 24 hours and 7 days, counted the way the cap
 * counts it (signing, signed, approved and pending approval; by when each began counting), so the 24-hour
 * figure is exactly what the next policy check will compare with the cap; and each agent's limits
 * (the cap, its own window limits, the organization's) with what their windows hold.
 */
export async function summarizeSpend(deps: AppDeps, principal: Principal, orgId: string): Promise<SpendSummary> {
  // Scope first: a refused caller must not even trigger the sweep's writes.
  const own = await listAgents(deps, principal, orgId);
  // Overdue approvals stop holding the cap the moment they expire; releasing them first keeps
  // these sums equal to what the cap check sees.
  await sweepExpiredApprovals(deps);
  const now = deps.now();
  const since = now - 7 * DAY_MS;
  // One snapshot for every agent's sums, so the totals add up to the same ledger state.
  const agents = await deps.uow.read(async (tx) => {
    const orgLimits = (await tx.organizations.get(orgId))?.limits ?? [];
    // The organization's windows are the same for every agent: measured once for the page.
    const orgStatuses = await orgLimitStatuses(tx, orgId, orgLimits, now);
    const out: AgentSpend[] = [];
    for (const agent of own) {
      const hours = await tx.spend.bucketsSince(agent.id, since, HOUR_MS, 7 * 24);
      const hourly = hours.slice(-CAP_WINDOW_MS / HOUR_MS);
      const daily = Array.from({ length: 7 }, (_, d) => sum(hours.slice(d * 24, d * 24 + 24)));
      const limits = await limitStatuses(tx, agent, orgLimits, now, orgStatuses);
      out.push({ agent, last24hMicros: sum(hourly), last7dMicros: sum(daily), hourly, daily, limits });
    }
    return out;
  });
  const live = agents.filter((a) => a.agent.status !== 'revoked');
  return {
    now,
    agents,
    totals: {
      last24hMicros: sum(agents.map((a) => a.last24hMicros)),
      last7dMicros: sum(agents.map((a) => a.last7dMicros)),
      daily: Array.from({ length: 7 }, (_, d) => sum(agents.map((a) => a.daily[d]!))),
      capMicros: sum(live.map((a) => a.agent.policy.spendCapMicros)),
    },
  };
}
