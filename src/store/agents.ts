import type { Db } from './db.js';
import { limitsFromStored, limitsToStored } from '../domain/limits.js';
import type { Agent, Policy, PolicyVersion } from '../domain/types.js';
import { decodePolicyVersion, encodePolicyVersion } from './policyVersionJson.js';
import type { AgentStatus } from '../domain/validate.js';
import type { AgentIdentity, AgentRepository } from './port.js';
import type { Synchronous } from './syncTables.js';

/**
 * A cache two table-group instances share: the writer connection's and the reader connection's
 * (store.ts). `cacheable` says when a row just read may be kept: only when it is committed state
 * that no open write transaction has changed (a write drops the entry inside its transaction,
 * before its commit, so a reader must not put the old row back meanwhile).
 */
export type SharedCache<T> = { records: Map<string, T>; cacheable: () => boolean };

type AgentRow = {
  id: string; org_id: string; name: string; status: AgentStatus; created_at: number; updated_at: number;
  last_ping_at: number | null; allowlist: string; spend_cap_micros: bigint; approval_threshold_micros: bigint;
  max_network_fee_wei: string; max_per_payment_micros: bigint | null; limits: string; version: bigint; policy_updated_at: number;
};

const SELECT = `SELECT a.id, a.org_id, a.name, a.status, a.created_at, a.updated_at, a.last_ping_at,
  p.allowlist, p.spend_cap_micros, p.approval_threshold_micros, p.max_network_fee_wei, p.max_per_payment_micros, p.limits, p.version, p.updated_at AS policy_updated_at
  FROM agents a JOIN policies p ON p.agent_id = a.id`;

function toAgent(r: AgentRow): Agent {
  return {
    id: r.id, orgId: r.org_id, name: r.name, status: r.status, createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at), lastPingAt: r.last_ping_at === null ? null : Number(r.last_ping_at),
    policy: {
      allowlist: JSON.parse(r.allowlist) as string[],
      spendCapMicros: BigInt(r.spend_cap_micros),
      approvalThresholdMicros: BigInt(r.approval_threshold_micros),
      maxNetworkFeeWei: BigInt(r.max_network_fee_wei),
      maxPerPaymentMicros: r.max_per_payment_micros === null ? null : BigInt(r.max_per_payment_micros),
      limits: limitsFromStored(r.limits),
      version: Number(r.version),
      updatedAt: Number(r.policy_updated_at),
    },
  };
}

/**
 * Agents and their policies; an agent always has exactly one policy row. Records are cached by
 * id: every write to these tables goes through this module (on the process's one connection),
 * which drops the cached record in the same call, so a cached read is never older than the row.
 * Callers treat the returned records as read-only.
 */
export function createAgentStore(db: Db, shared?: SharedCache<Agent>): Synchronous<AgentRepository> {
  // A reader connection's store (store.ts) shares the writer's cache, so a write's drop reaches it,
  // and fills it only when no write transaction is open (see SharedCache).
  const cache = shared?.records ?? new Map<string, Agent>();
  const cacheable = shared?.cacheable ?? (() => !db.inTransaction);
  const insertAgent = db.prepare('INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
  const upsertPolicy = db.prepare(`INSERT INTO policies (agent_id, allowlist, spend_cap_micros, approval_threshold_micros, max_network_fee_wei, max_per_payment_micros, limits, updated_at, version)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT MAX(version) FROM policy_versions WHERE agent_id = ?)) ON CONFLICT (agent_id) DO UPDATE SET allowlist = excluded.allowlist,
    spend_cap_micros = excluded.spend_cap_micros, approval_threshold_micros = excluded.approval_threshold_micros,
    max_network_fee_wei = excluded.max_network_fee_wei, max_per_payment_micros = excluded.max_per_payment_micros, limits = excluded.limits, updated_at = excluded.updated_at, version = excluded.version`);
  const addVersion = db.prepare(`INSERT INTO policy_versions (agent_id, version, created_at, actor, policy)
    SELECT ?, COALESCE(MAX(version), 0) + 1, ?, ?, ? FROM policy_versions WHERE agent_id = ?`);
  const versions = db.prepare('SELECT version, created_at, actor, policy FROM policy_versions WHERE agent_id = ? ORDER BY version');
  // Money columns are read as bigint so no sum or comparison ever passes through a double.
  const byId = db.prepare(`${SELECT} WHERE a.id = ?`).safeIntegers(true);
  const byOrg = db.prepare(`${SELECT} WHERE a.org_id = ? ORDER BY a.created_at, a.id`).safeIntegers(true);
  const update = db.prepare('UPDATE agents SET name = ?, status = ?, updated_at = ? WHERE id = ?');
  const touchPing = db.prepare('UPDATE agents SET last_ping_at = ? WHERE id = ?');
  // A changed policy's windows start again from the ledger when next measured (migration 0019).
  const dropStates = db.prepare('DELETE FROM limit_states WHERE agent_id = ?');
  const setPolicy = (agentId: string, p: Policy, actor = '') => {
    cache.delete(agentId);
    dropStates.run(agentId);
    addVersion.run(agentId, p.updatedAt, actor, encodePolicyVersion(p), agentId);
    upsertPolicy.run(agentId, JSON.stringify(p.allowlist), p.spendCapMicros, p.approvalThresholdMicros, p.maxNetworkFeeWei.toString(), p.maxPerPaymentMicros, limitsToStored(p.limits), p.updatedAt, agentId);
  };
  const get = (id: string): Agent | undefined => {
    const hit = cache.get(id);
    if (hit) return hit;
    const r = byId.get(id) as AgentRow | undefined;
    if (!r) return undefined;
    const agent = toAgent(r);
    // Inside a transaction the row may still be rolled back: only committed state is cached.
    if (cacheable()) cache.set(id, agent);
    return agent;
  };
  return {
    insert(agent: Agent, actor = ''): void {
      insertAgent.run(agent.id, agent.orgId, agent.name, agent.status, agent.createdAt, agent.updatedAt);
      setPolicy(agent.id, agent.policy, actor);
    },
    policyVersions(agentId: string): PolicyVersion[] {
      return (versions.all(agentId) as Array<{ version: number; created_at: number; actor: string; policy: string }>).map((r) => ({
        agentId, version: Number(r.version), createdAt: Number(r.created_at), actor: r.actor, policy: decodePolicyVersion(r.policy, Number(r.version), Number(r.created_at)),
      }));
    },
    get,
    /**
     * The agent and policy a write decides on (a payment, an approval, a collection, a fee bump),
     * held against a concurrent pause or policy change until the write commits. SQLite's writes
     * are serialized, so this is `get`; PostgreSQL's twin locks the policy row, which every such
     * change writes.
     */
    getForUse: get,
    /**
     * The agent without its policy, for a write that decides nothing on the policy (a ping).
     * SQLite: the cached record; PostgreSQL's twin reads the agent row alone, so a ping never reads
     * the policy row a registry write rewrites (pg/services.ts).
     */
    getIdentity: (id: string): AgentIdentity | undefined => get(id),
    listByOrg(orgId: string): Agent[] {
      return (byOrg.all(orgId) as AgentRow[]).map(toAgent);
    },
    update(id: string, name: string, status: AgentStatus, now: number): void {
      cache.delete(id);
      update.run(name, status, now, id);
    },
    setPolicy,
    touchPing(id: string, now: number): void {
      cache.delete(id);
      touchPing.run(now, id);
    },
  };
}
export type AgentStore = ReturnType<typeof createAgentStore>;
