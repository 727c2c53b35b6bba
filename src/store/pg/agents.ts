import { limitsFromStored, limitsToStored } from '../../domain/limits.js';
import type { Agent, Policy } from '../../domain/types.js';
import { decodePolicyVersion, encodePolicyVersion } from '../policyVersionJson.js';
import type { AgentStatus } from '../../domain/validate.js';
import { num, numOrNull, statement, type Sql } from './sql.js';
import type { AgentRepository } from '../port.js';

type AgentRow = {
  id: string; org_id: string; name: string; status: AgentStatus; created_at: bigint; updated_at: bigint;
  last_ping_at: bigint | null; allowlist: string; spend_cap_micros: bigint; approval_threshold_micros: bigint;
  max_network_fee_wei: string; max_per_payment_micros: bigint | null; limits: string; version: bigint; policy_updated_at: bigint;
};

const SELECT = `SELECT a.id, a.org_id, a.name, a.status, a.created_at, a.updated_at, a.last_ping_at,
  p.allowlist, p.spend_cap_micros, p.approval_threshold_micros, p.max_network_fee_wei, p.max_per_payment_micros, p.limits, p.version, p.updated_at AS policy_updated_at
  FROM agents a JOIN policies p ON p.agent_id = a.id`;

const INSERT = statement('agent.insert', 'INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)');
const UPSERT_POLICY = statement('agent.upsertPolicy', `INSERT INTO policies (agent_id, allowlist, spend_cap_micros, approval_threshold_micros, max_network_fee_wei, max_per_payment_micros, limits, updated_at, version)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, (SELECT MAX(version) FROM policy_versions WHERE agent_id = $1)) ON CONFLICT (agent_id) DO UPDATE SET allowlist = excluded.allowlist,
  spend_cap_micros = excluded.spend_cap_micros, approval_threshold_micros = excluded.approval_threshold_micros,
  max_network_fee_wei = excluded.max_network_fee_wei, max_per_payment_micros = excluded.max_per_payment_micros, limits = excluded.limits, updated_at = excluded.updated_at, version = excluded.version`);
const ADD_VERSION = statement('agent.addVersion', `INSERT INTO policy_versions (agent_id, version, created_at, actor, policy)
  SELECT $1, COALESCE(MAX(version), 0) + 1, $2, $3, $4 FROM policy_versions WHERE agent_id = $1`);
const VERSIONS = statement('agent.versions', 'SELECT version, created_at, actor, policy FROM policy_versions WHERE agent_id = $1 ORDER BY version');
// A changed policy's windows start again from the ledger when next measured (migration 0019).
const DROP_STATES = statement('agent.dropLimitStates', 'DELETE FROM limit_states WHERE agent_id = $1');
const BY_ID = statement('agent.byId', `${SELECT} WHERE a.id = $1`);
// The policy row is what a deciding write holds: FOR SHARE OF p makes a change's UPDATE of it wait
// for the write, or, committed since the write's snapshot, makes this read a serialization failure
// (retried on a fresh snapshot). A plain read under SERIALIZABLE would let a payment decided on the
// old rows commit after the change was acknowledged. Every change a decision depends on writes this
// row: a policy change, an agent update (status, TOUCH_POLICY) and, for agents that allow services
// by slug, a registry change (services.ts). The agent row itself is not locked: pings update it
// (last_ping_at) many times a second and decide nothing, and would make every payment retry.
const BY_ID_FOR_USE = statement('agent.byIdForUse', `${SELECT} WHERE a.id = $1 FOR SHARE OF p`);
const TOUCH_POLICY = statement('agent.touchPolicy', 'UPDATE policies SET updated_at = updated_at WHERE agent_id = $1');
const BY_ORG = statement('agent.byOrg', `${SELECT} WHERE a.org_id = $1 ORDER BY a.created_at, a.id`);
const UPDATE = statement('agent.update', 'UPDATE agents SET name = $1, status = $2, updated_at = $3 WHERE id = $4');
// The agent row alone (a ping): reading the policy row too would put every ping in a read/write
// cycle with any registry write that rewrites it (services.ts), and the ping, short, would win.
const IDENTITY = statement('agent.identity', 'SELECT id, org_id, name, status, last_ping_at FROM agents WHERE id = $1');
const TOUCH_PING = statement('agent.touchPing', 'UPDATE agents SET last_ping_at = $1 WHERE id = $2');

function toAgent(r: AgentRow): Agent {
  return {
    id: r.id, orgId: r.org_id, name: r.name, status: r.status, createdAt: num(r.created_at),
    updatedAt: num(r.updated_at), lastPingAt: numOrNull(r.last_ping_at),
    policy: {
      allowlist: JSON.parse(r.allowlist) as string[],
      spendCapMicros: BigInt(r.spend_cap_micros),
      approvalThresholdMicros: BigInt(r.approval_threshold_micros),
      maxNetworkFeeWei: BigInt(r.max_network_fee_wei),
      maxPerPaymentMicros: r.max_per_payment_micros === null ? null : BigInt(r.max_per_payment_micros),
      limits: limitsFromStored(r.limits),
      version: num(r.version),
      updatedAt: num(r.policy_updated_at),
    },
  };
}

/**
 * Agents and their policies (PostgreSQL twin of ../agents.ts). Not cached in process: a pause,
 * a revocation or a policy change made on another replica must hold on the next request here, and
 * there is no cross-process invalidation yet. Money columns are BIGINT read as bigint.
 */
export function createPgAgentStore(sql: Sql): AgentRepository {
  const setPolicy = async (agentId: string, p: Policy, actor = ''): Promise<void> => {
    await sql.run(DROP_STATES, [agentId]);
    await sql.run(ADD_VERSION, [agentId, p.updatedAt, actor, encodePolicyVersion(p)]);
    await sql.run(UPSERT_POLICY, [agentId, JSON.stringify(p.allowlist), p.spendCapMicros, p.approvalThresholdMicros, p.maxNetworkFeeWei.toString(), p.maxPerPaymentMicros, limitsToStored(p.limits), p.updatedAt]);
  };
  return {
    async insert(agent, actor) {
      await sql.run(INSERT, [agent.id, agent.orgId, agent.name, agent.status, agent.createdAt, agent.updatedAt]);
      await setPolicy(agent.id, agent.policy, actor);
    },
    async policyVersions(agentId) {
      const rows = await sql.rows<{ version: bigint; created_at: bigint; actor: string; policy: string }>(VERSIONS, [agentId]);
      return rows.map((r) => ({ agentId, version: num(r.version), createdAt: num(r.created_at), actor: r.actor, policy: decodePolicyVersion(r.policy, num(r.version), num(r.created_at)) }));
    },
    async get(id) {
      const r = await sql.one<AgentRow>(BY_ID, [id]);
      return r && toAgent(r);
    },
    async getForUse(id) {
      const r = await sql.one<AgentRow>(BY_ID_FOR_USE, [id]);
      return r && toAgent(r);
    },
    async getIdentity(id) {
      const r = await sql.one<Pick<AgentRow, 'id' | 'org_id' | 'name' | 'status' | 'last_ping_at'>>(IDENTITY, [id]);
      return r && { id: r.id, orgId: r.org_id, name: r.name, status: r.status, lastPingAt: numOrNull(r.last_ping_at) };
    },
    async listByOrg(orgId) {
      return (await sql.rows<AgentRow>(BY_ORG, [orgId])).map(toAgent);
    },
    async update(id, name, status, now) {
      await sql.run(TOUCH_POLICY, [id]);
      await sql.run(UPDATE, [name, status, now, id]);
    },
    setPolicy,
    async touchPing(id, now) {
      await sql.run(TOUCH_PING, [now, id]);
    },
  };
}
