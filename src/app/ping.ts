import { DomainError } from '../domain/errors.js';
import type { ApiKeyPrincipal } from '../domain/types.js';
import { AGENT_ID } from '../domain/validate.js';
import { newUuid } from '../store/ids.js';
import type { AppDeps } from './deps.js';

export type PingResult = { ok: true; agentId: string; agentName: string; orgId: string; status: string };

function missingAgent(message: string): DomainError {
  return new DomainError('missing_agent', message, { code: 'missing_agent_id' });
}

/**
 * A ping writes its zero-amount `recorded` ledger row only when the agent has none from the last
 * this-many milliseconds, so an agent that pings as a health check does not flood the ledger, the
 * dashboard and the CSV export: at most one row per agent per interval. last_ping_at is updated
 * on every ping.
 */
export const PING_RECORD_INTERVAL_MS = 10 * 60_000;

/**
 * Confirms a key and agent pair, updates the agent's last-ping time (the dashboard shows it as
 * connected) and records a zero-amount `ping` transaction unless one from the last
 * PING_RECORD_INTERVAL_MS exists. Unknown, revoked and other organizations' agents all get the
 * same 400, so nothing about other organizations leaks. Paused agents may ping.
 */
export async function pingAgent(deps: AppDeps, principal: ApiKeyPrincipal, agentId: string): Promise<PingResult> {
  if (agentId === '') throw missingAgent('agent_id is required');
  if (!AGENT_ID.test(agentId)) throw missingAgent('agent_id is unknown or revoked');
  return deps.uow.write(async (tx) => {
    const agent = await tx.agents.getIdentity(agentId);
    if (!agent || agent.orgId !== principal.orgId || agent.status === 'revoked') throw missingAgent('agent_id is unknown or revoked');
    const now = deps.now();
    if (!await tx.transactions.hasPingBetween(agent.orgId, agent.id, now - PING_RECORD_INTERVAL_MS, now)) {
      await tx.transactions.insert({
        id: newUuid(), orgId: agent.orgId, agentId: agent.id, type: 'ping', status: 'recorded', chainId: 0, recipient: '',
        amountMicros: 0n, reason: '', serviceSlug: '', approvalId: null, createdAt: now,
      });
    }
    await tx.agents.touchPing(agent.id, now);
    return { ok: true, agentId: agent.id, agentName: agent.name, orgId: agent.orgId, status: agent.status };
  }, { alone: true });
}
