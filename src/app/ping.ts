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
 * Confirms a key and agent pair and records a zero-amount `ping` transaction so the dashboard
 * can show the agent as connected. Unknown, revoked and other organizations' agents all get the
 * same 400, so nothing about other organizations leaks. Paused agents may ping.
 */
export function pingAgent(deps: AppDeps, principal: ApiKeyPrincipal, agentId: string): PingResult {
  if (agentId === '') throw missingAgent('agent_id is required');
  if (!AGENT_ID.test(agentId)) throw missingAgent('agent_id is unknown or revoked');
  return deps.uow.writeNow(() => {
    const agent = deps.store.agents.get(agentId);
    if (!agent || agent.orgId !== principal.orgId || agent.status === 'revoked') throw missingAgent('agent_id is unknown or revoked');
    const now = deps.now();
    deps.store.transactions.insert({
      id: newUuid(), orgId: agent.orgId, agentId: agent.id, type: 'ping', status: 'recorded', chainId: 0, recipient: '',
      amountMicros: 0n, reason: '', serviceSlug: '', approvalId: null, createdAt: now,
    });
    deps.store.agents.touchPing(agent.id, now);
    return { ok: true, agentId: agent.id, agentName: agent.name, orgId: agent.orgId, status: agent.status };
  });
}
