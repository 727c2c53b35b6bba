import { parseLimits } from '../../domain/limits.js';
import { policyChanges, type PolicyChange } from '../../domain/policyChanges.js';
import { DomainError, invalidArgument } from '../../domain/errors.js';
import { formatUsd, parseUsd } from '../../domain/money.js';
import { DEFAULT_MAX_NETWORK_FEE_WEI, parseMaxNetworkFeeWei } from '../../domain/networkFee.js';
import type { Agent, Policy, PolicyVersion, Principal } from '../../domain/types.js';
import { ADDRESS, AGENT_ID, SLUG, isAgentStatus, requireName } from '../../domain/validate.js';
import { newId } from '../../store/ids.js';
import { requireAccess, type Permission } from '../access.js';
import type { AppDeps } from '../deps.js';
import { requireOrgAccess } from '../access.js';
import { findVisibleService } from '../registry/registry.js';
import { withinWrite } from '../withinWrite.js';

const MAX_ALLOWLIST = 1000;

/** A policy that allows nothing: new agents start here until an operator sets one. */
export function denyAllPolicy(now: number): Policy {
  return { allowlist: [], spendCapMicros: 0n, approvalThresholdMicros: 0n, maxNetworkFeeWei: DEFAULT_MAX_NETWORK_FEE_WEI, maxPerPaymentMicros: null, limits: [], updatedAt: now };
}

const agentNotFound = () => new DomainError('not_found', 'Agent not found', { code: 'agent_not_found' });

/** Agent of the given organization, or 404. Other organizations' agents look exactly unknown. */
export async function requireAgentInOrg(deps: AppDeps, orgId: string, agentId: string): Promise<Agent> {
  const agent = AGENT_ID.test(agentId) ? await deps.store.agents.get(agentId) : undefined;
  if (!agent || agent.orgId !== orgId) throw agentNotFound();
  return agent;
}

/** An agent the principal may act on with `permission`; unknown and out-of-scope ids are the same 404. */
async function requireAgentAccess(deps: AppDeps, principal: Principal, permission: Permission, agentId: string): Promise<Agent> {
  const agent = AGENT_ID.test(agentId) ? await deps.store.agents.get(agentId) : undefined;
  if (!agent) throw agentNotFound();
  requireAccess(principal, permission, agent.orgId, agentNotFound);
  return agent;
}

/** One agent with its policy. */
export function getAgent(deps: AppDeps, principal: Principal, agentId: string): Promise<Agent> {
  return requireAgentAccess(deps, principal, 'read', agentId);
}

export async function createAgent(deps: AppDeps, principal: Principal, input: { orgId: string; name: string; policy?: Policy }): Promise<Agent> {
  const name = requireName(input.name, 'name');
  return deps.uow.write(async (tx) => {
    await requireOrgAccess(withinWrite(deps, tx), principal, 'manage', input.orgId);
    const now = deps.now();
    const agent: Agent = {
      id: newId('agt'), orgId: input.orgId, name, status: 'active', createdAt: now, updatedAt: now,
      lastPingAt: null, policy: { ...(input.policy ?? denyAllPolicy(now)), version: 1 },
    };
    await tx.agents.insert(agent, actorOf(principal));
    return agent;
  }, { alone: true });
}

export async function updateAgent(deps: AppDeps, principal: Principal, input: { agentId: string; name?: string; status?: string }): Promise<Agent> {
  const name = input.name === undefined ? undefined : requireName(input.name, 'name');
  const status = input.status;
  if (status !== undefined && !isAgentStatus(status)) throw invalidArgument('status must be one of active, paused, revoked');
  // An update that says nothing is a request that was not understood (a status the caller's tool
  // dropped, a form without its field), not a success to report.
  if (name === undefined && status === undefined) throw invalidArgument('status or name is required: the update would change nothing');
  return deps.uow.write(async (tx) => {
    const agent = await requireAgentAccess(withinWrite(deps, tx), principal, 'manage', input.agentId);
    // Revocation is final: a revoked agent's id may have leaked, so it never comes back.
    if (agent.status === 'revoked' && status !== undefined && status !== 'revoked') {
      throw new DomainError('failed_precondition', 'A revoked agent cannot be reactivated', { code: 'agent_revoked' });
    }
    await tx.agents.update(agent.id, name ?? agent.name, status ?? agent.status, deps.now());
    return (await tx.agents.get(agent.id))!;
  }, { alone: true });
}

export async function listAgents(deps: AppDeps, principal: Principal, orgId: string): Promise<Agent[]> {
  await requireOrgAccess(deps, principal, 'read', orgId);
  return deps.store.agents.listByOrg(orgId);
}

/**
 * Policy fields as every transport delivers them. An unset fee ceiling or per-payment maximum
 * keeps the current one; an empty per-payment maximum removes it.
 */
export type PolicyInput = {
  allowlist: string[]; spendCapUsd: string; approvalThresholdUsd: string; maxNetworkFeeWei?: string; maxPerPaymentUsd?: string;
  /** Window limits as the policy document writes them (domain/limits.ts); undefined keeps the agent's. */
  limits?: unknown;
};

/**
 * Validates and normalizes policy input: addresses lowercased, duplicates dropped. An unset fee
 * ceiling comes back as the default and an unset per-payment maximum as none; setPolicy replaces
 * each with the agent's current one.
 */
export function parsePolicy(input: PolicyInput, now: number): Policy {
  if (input.allowlist.length > MAX_ALLOWLIST) throw invalidArgument(`allowlist must have at most ${MAX_ALLOWLIST} entries`);
  const allowlist: string[] = [];
  for (const raw of input.allowlist) {
    const entry = raw.trim();
    let normalized: string;
    if (ADDRESS.test(entry)) normalized = entry.toLowerCase();
    // An entry that starts like an address is a mistyped address, never a slug.
    else if (SLUG.test(entry) && !/^0x/i.test(entry)) normalized = entry;
    else throw invalidArgument(`allowlist entry "${entry.slice(0, 80)}" is neither a 0x address nor a service slug`);
    if (!allowlist.includes(normalized)) allowlist.push(normalized);
  }
  return {
    allowlist,
    // Not trimmed: an amount is read the same way on every surface (REST refuses " 0.5" too).
    spendCapMicros: parseUsd(input.spendCapUsd, 'spend_cap_usd'),
    approvalThresholdMicros: parseUsd(input.approvalThresholdUsd, 'approval_threshold_usd'),
    maxNetworkFeeWei: input.maxNetworkFeeWei === undefined ? DEFAULT_MAX_NETWORK_FEE_WEI : parseMaxNetworkFeeWei(input.maxNetworkFeeWei),
    maxPerPaymentMicros: input.maxPerPaymentUsd === undefined || input.maxPerPaymentUsd === '' ? null : parseUsd(input.maxPerPaymentUsd, 'max_per_payment_usd'),
    limits: input.limits === undefined ? [] : parseLimits(input.limits),
    updatedAt: now,
  };
}

/**
 * Replaces an agent's policy. Every field is validated before the write starts, so bad input
 * changes nothing. Leaving the fee ceiling or the per-payment maximum unset keeps the agent's
 * current one: a client that predates the field cannot lift or reset it by omission.
 */
export async function setPolicy(deps: AppDeps, principal: Principal, input: PolicyInput & { agentId: string }): Promise<{ policy: Policy; warnings: string[] }> {
  const parsed = parsePolicy(input, deps.now());
  return deps.uow.write(async (tx) => {
    const inTx = withinWrite(deps, tx);
    const agent = await requireAgentAccess(inTx, principal, 'manage', input.agentId);
    const policy = policyAfter(agent, input, parsed);
    await tx.agents.setPolicy(input.agentId, policy, actorOf(principal));
    policy.version = (agent.policy.version ?? 0) + 1;
    return { policy, warnings: await policyWarnings(inTx, principal, agent.orgId, policy) };
  }, { alone: true });
}

/** The policy `input` (parsed as `parsed`) makes of the agent's: an unset fee ceiling, per-payment maximum or limits keeps the agent's. */
export function policyAfter(agent: Agent, input: PolicyInput, parsed: Policy): Policy {
  return {
    ...parsed,
    maxNetworkFeeWei: input.maxNetworkFeeWei === undefined ? agent.policy.maxNetworkFeeWei : parsed.maxNetworkFeeWei,
    maxPerPaymentMicros: input.maxPerPaymentUsd === undefined ? agent.policy.maxPerPaymentMicros : parsed.maxPerPaymentMicros,
    limits: input.limits === undefined ? agent.policy.limits : parsed.limits,
  };
}

/** Who made a policy version, as its history shows it. */
function actorOf(principal: Principal): string {
  switch (principal.kind) {
    case 'operator': return 'admin token';
    case 'dashboard_user': return `dashboard user ${principal.email}`;
    default: return `API key ${principal.keyId}`;
  }
}

/** Every version of an agent's policy, oldest first, for whoever may read the agent. */
export async function policyHistory(deps: AppDeps, principal: Principal, agentId: string): Promise<PolicyVersion[]> {
  const agent = await requireAgentAccess(deps, principal, 'read', agentId);
  return deps.store.agents.policyVersions(agent.id);
}

/** A version of a policy with what it changed from the version before; null for the first one kept. */
export type PolicyVersionChanges = PolicyVersion & { changes: PolicyChange[] | null };

/**
 * The latest `count` versions of an agent's policy, newest first, each with what it changed from
 * the version before it, and how many versions there are in all; for whoever may read the agent.
 */
export async function recentPolicyChanges(deps: AppDeps, principal: Principal, agentId: string, count: number): Promise<{ total: number; versions: PolicyVersionChanges[] }> {
  const all = await policyHistory(deps, principal, agentId);
  const first = Math.max(0, all.length - count);
  const versions = all.slice(first).map((v, i) => ({ ...v, changes: first + i === 0 ? null : policyChanges(all[first + i - 1]!.policy, v.policy) }));
  return { total: all.length, versions: versions.reverse() };
}

/**
 * What a saved policy allows that is probably a mistake, in words for the person who set it: a
 * slug no registry record visible to the organization has (it matches nothing until one is
 * registered, so it is allowed, not refused), and an approval threshold above the spend cap or
 * not below the per-payment maximum (no payment can then ever wait for approval).
 */
async function policyWarnings(deps: AppDeps, principal: Principal, orgId: string, policy: Policy): Promise<string[]> {
  const warnings: string[] = [];
  for (const entry of policy.allowlist) {
    if (ADDRESS.test(entry) || await findVisibleService(deps, principal, orgId, entry)) continue;
    warnings.push(`allowlist entry "${entry}" is not a registered service slug; it matches nothing until a service with that slug is registered`);
  }
  if (policy.approvalThresholdMicros > policy.spendCapMicros) {
    warnings.push(`approval threshold ${formatUsd(policy.approvalThresholdMicros)} USD is above the spend cap ${formatUsd(policy.spendCapMicros)} USD; no payment can reach it, so none will wait for approval`);
  } else if (policy.maxPerPaymentMicros !== null && policy.approvalThresholdMicros >= policy.maxPerPaymentMicros) {
    warnings.push(`approval threshold ${formatUsd(policy.approvalThresholdMicros)} USD is not below the maximum per payment ${formatUsd(policy.maxPerPaymentMicros)} USD; no payment can exceed it, so none will wait for approval`);
  }
  return warnings;
}
