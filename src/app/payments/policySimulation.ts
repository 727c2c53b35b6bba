import { invalidArgument } from '../../domain/errors.js';
import type { RuleInfo } from '../../domain/policy.js';
import { simulatePolicy, type OtherHold, type Outcome, type PastRequest, type SimulationResult } from '../../domain/simulation.js';
import type { Principal } from '../../domain/types.js';
import type { HoldingRow, RequestHistoryRow } from '../../store/port.js';
import type { AppDeps } from '../deps.js';
import { getAgent, parsePolicy, policyAfter, type PolicyInput } from '../organizations/agents.js';
import { loadRequest } from './signatures.js';

/** Days replayed when none are asked for, and the most that may be. */
export const DEFAULT_SIMULATION_DAYS = 30;
export const MAX_SIMULATION_DAYS = 366;
/** Past requests one simulation replays at most; beyond, fewer days must be asked for. */
export const MAX_SIMULATED_REQUESTS = 100_000;
/** Other agents' holding payments one simulation reads at most (for the organization's limits). */
export const MAX_OTHER_HOLDS = 200_000;

const DAY_MS = 24 * 3600 * 1000;

/** Denials the policy document does not decide: they stay denied whatever it says. */
const FIXED_DENIALS = new Set(['agent_status', 'max_amount', 'amount_limit', 'treasury_funds', 'treasury_gas']);

export type SimulationReport = SimulationResult & { agentId: string; since: number; until: number; days: number };

/**
 * What-if before a policy change (domain/simulation.ts): the agent's payment requests of the last
 * `days` days replayed under the policy `input` would make, as SetPolicy would make it. Writes
 * nothing; whoever may read the agent may ask.
 */
export async function simulatePolicyChange(deps: AppDeps, principal: Principal, input: PolicyInput & { agentId: string; days?: number }): Promise<SimulationReport> {
  const days = input.days ?? DEFAULT_SIMULATION_DAYS;
  if (!Number.isInteger(days) || days < 1 || days > MAX_SIMULATION_DAYS) {
    throw invalidArgument(`days must be a whole number of days from 1 to ${MAX_SIMULATION_DAYS}`);
  }
  const now = deps.now();
  const parsed = parsePolicy(input, now);
  const agent = await getAgent(deps, principal, input.agentId);
  const policy = policyAfter(agent, input, parsed);
  const org = (await deps.store.organizations.get(agent.orgId))!;
  const since = now - days * DAY_MS;

  const rows = await deps.store.payments.requestHistory(agent.orgId, agent.id, since, MAX_SIMULATED_REQUESTS + 1);
  if (rows.length > MAX_SIMULATED_REQUESTS) {
    throw invalidArgument(`the last ${days} days hold more than ${MAX_SIMULATED_REQUESTS} payment requests of this agent; simulate fewer days`, 'simulation_too_large');
  }
  let otherHolds: HoldingRow[] = [];
  if (org.limits.length > 0) {
    const longest = Math.max(...org.limits.map((l) => l.windowMs));
    otherHolds = await deps.store.payments.heldByOthers(agent.orgId, agent.id, since - longest, MAX_OTHER_HOLDS + 1);
    if (otherHolds.length > MAX_OTHER_HOLDS) {
      throw invalidArgument(`the organization's other agents hold more than ${MAX_OTHER_HOLDS} payments in its limits' windows; simulate fewer days`, 'simulation_too_large');
    }
  }

  const result = simulatePolicy({
    requests: rows.map(pastRequest),
    policy,
    orgLimits: org.limits,
    otherHolds: otherHolds.flatMap(otherHoldsOf).sort((a, b) => a.at - b.at),
    approvalWindowMs: org.approvalWindowSeconds * 1000,
  });
  return { ...result, agentId: agent.id, since, until: now, days };
}

/**
 * What another agent's holding payment held, and when. An approved one held while it waited, then
 * from the decision, then (once collected) from its signing: each move of its hold restarts it.
 */
function otherHoldsOf(h: HoldingRow): OtherHold[] {
  const base = { recipient: h.recipient, slug: h.serviceSlug || null, others: h.splitRecipients, amountMicros: h.amountMicros, feeWei: h.feeGwei * 1_000_000_000n };
  const current = { ...base, at: h.capAt, until: h.expiresAt };
  if (h.decidedAt === null) return [current];
  const waiting = { ...base, at: h.createdAt, until: h.decidedAt };
  return h.capAt > h.decidedAt ? [waiting, { ...base, at: h.decidedAt, until: h.capAt }, current] : [waiting, current];
}

/** The decision a request had when it was made: a row that waited for approval keeps its approval id whatever came of it. */
function outcomeHad(r: RequestHistoryRow): Outcome {
  if (r.approvalId !== null) return 'pending_approval';
  return r.status === 'denied' ? 'denied' : 'allowed';
}

function pastRequest(r: RequestHistoryRow): PastRequest {
  const had = outcomeHad(r);
  const rule = had === 'denied' ? storedRule(r) : null;
  const payload = r.type === 'raw_transaction' ? loadRequest(r.request).payload : null;
  return {
    id: r.id, at: r.createdAt, recipient: r.recipient, slug: r.serviceSlug || null, others: r.splitRecipients, amountMicros: r.amountMicros,
    networkFee: payload?.kind === 'raw_transaction' ? { gas: payload.gas, maxFeePerGas: payload.maxFeePerGas } : null,
    feeWei: r.feeGwei * 1_000_000_000n, had,
    approvalWindowMs: r.approvalExpiresAt === null ? undefined : r.approvalExpiresAt - r.createdAt,
    fixedDenial: rule && FIXED_DENIALS.has(rule.kind) ? rule : null,
  };
}

/**
 * The rule a denial recorded. Rows written before rules were kept carry only the reason; the
 * denials the policy cannot change are told apart by its words.
 */
function storedRule(r: RequestHistoryRow): RuleInfo | null {
  if (r.rule) return JSON.parse(r.rule) as RuleInfo;
  const kind = r.reason.startsWith('Agent is ') ? 'agent_status'
    : r.reason.includes("exceeds the request's max_amount_usd") ? 'max_amount'
      : r.reason.includes('larger than the ledger can record') ? 'amount_limit'
        : null;
  return kind && { kind, window: null, scope: null, recipient: null, limit: null, spent: null };
}
