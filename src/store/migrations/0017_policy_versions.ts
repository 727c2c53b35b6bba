import type { Migration } from './migration.js';

/**
 * Policy versions: every change of an agent's policy is kept forever as a numbered version (its
 * time, who made it, and the whole policy as JSON: store/policyVersionJson.ts), policies.version
 * is the current one, and every payment row records the version that decided it. Existing
 * policies become version 1 with an empty `actor` (made before versions were kept); existing rows
 * keep a NULL version.
 *
 * PostgreSQL: the same tables, the JSON built with json_build_object. Never edit once landed.
 */

const sqlite = `
ALTER TABLE policies ADD COLUMN version INTEGER NOT NULL DEFAULT 1 CHECK (typeof(version) = 'integer' AND version >= 1);
CREATE TABLE policy_versions (
  agent_id   TEXT NOT NULL REFERENCES agents(id),
  version    INTEGER NOT NULL CHECK (version >= 1),
  created_at INTEGER NOT NULL,
  actor      TEXT NOT NULL,
  policy     TEXT NOT NULL,
  PRIMARY KEY (agent_id, version)
) STRICT;
INSERT INTO policy_versions (agent_id, version, created_at, actor, policy)
  SELECT agent_id, 1, updated_at, '', json_object('allowlist', json(allowlist), 'spend_cap_micros', CAST(spend_cap_micros AS TEXT),
    'approval_threshold_micros', CAST(approval_threshold_micros AS TEXT), 'max_network_fee_wei', max_network_fee_wei,
    'max_per_payment_micros', CAST(max_per_payment_micros AS TEXT), 'limits', json(limits)) FROM policies;
ALTER TABLE transactions ADD COLUMN policy_version INTEGER;
`;

const postgres = `
ALTER TABLE policies ADD COLUMN version BIGINT NOT NULL DEFAULT 1 CHECK (version >= 1);
CREATE TABLE policy_versions (
  agent_id   TEXT COLLATE "C" NOT NULL REFERENCES agents(id),
  version    BIGINT NOT NULL CHECK (version >= 1),
  created_at BIGINT NOT NULL,
  actor      TEXT COLLATE "C" NOT NULL,
  policy     TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (agent_id, version)
);
INSERT INTO policy_versions (agent_id, version, created_at, actor, policy)
  SELECT agent_id, 1, updated_at, '', json_build_object('allowlist', allowlist::json, 'spend_cap_micros', spend_cap_micros::text,
    'approval_threshold_micros', approval_threshold_micros::text, 'max_network_fee_wei', max_network_fee_wei,
    'max_per_payment_micros', max_per_payment_micros::text, 'limits', limits::json)::text FROM policies;
ALTER TABLE transactions ADD COLUMN policy_version BIGINT;
`;

export const migration: Migration = { version: 17, name: 'policy_versions', sqlite, postgres };
