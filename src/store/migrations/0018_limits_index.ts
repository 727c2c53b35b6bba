import type { Migration } from './migration.js';

/**
 * PostgreSQL: the organization index of the window limits (0016) becomes a full index
 * (org_id, holds_cap, cap_at). As a partial index on holds_cap = 1, PostgreSQL's planner chose it
 * for the per-agent cap sum too (it has no org_id to seek on, so it read every holding row of the
 * ledger in the window): under SERIALIZABLE that scan took predicate locks over every agent's new
 * rows, so concurrent payments of different agents failed each other's commits and were retried,
 * and sign throughput fell to about 40 %. A leading org_id and holds_cap that the cap sum does not
 * state leave transactions_cap (agent_id first) as its only useful index.
 *
 * SQLite keeps the partial index: its planner seeks by the equality columns it is given, and it
 * has no predicate locks. The version exists on both so the two lists stay equal. Never edit once
 * landed: add the next migration.
 */

const sqlite = `SELECT 1;`;

const postgres = `
DROP INDEX transactions_limits;
CREATE INDEX transactions_limits ON transactions (org_id, holds_cap, cap_at);
`;

export const migration: Migration = { version: 18, name: 'limits_index', sqlite, postgres };
