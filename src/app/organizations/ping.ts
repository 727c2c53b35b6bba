import { DomainError } from '../../domain/errors.js';
import type { ApiKeyPrincipal } from '../../domain/types.js';
import { AGENT_ID } from '../../domain/validate.js';
import { newUuid } from '../../store/ids.js';
import type { AppDeps } from '../deps.js';

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
 * last_ping_at moves at most once per this many milliseconds: a ping within it of the recorded
 * time writes nothing. An agent that pings many times a second while it pays would otherwise
 * write its own agent row for every ping, and on PostgreSQL each such write put the agent's
 * in-flight payments (which read that row) in a read/write cycle with the ping, failing them.
 */
export const PING_TOUCH_INTERVAL_MS = 1_000;

/**
 * Confirms a key and agent pair, updates the agent's last-ping time (the dashboard shows it as
 * connected; at most once a second, PING_TOUCH_INTERVAL_MS) and records a zero-amount `ping` transaction unless one from the last
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
    // A clock that went back moves it at once, so it is never left ahead of the clock.
    if (agent.lastPingAt === null || now - agent.lastPingAt >= PING_TOUCH_INTERVAL_MS || now < agent.lastPingAt) await tx.agents.touchPing(agent.id, now);
    return { ok: true, agentId: agent.id, agentName: agent.name, orgId: agent.orgId, status: agent.status };
  }, { alone: true });
}
