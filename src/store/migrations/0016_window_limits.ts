import type { Migration } from './migration.js';

/**
 * Window limits (domain/limits.ts): an agent's in its policy, an organization's beside it, each a
 * JSON array as the policy document writes it ('[]' for none, every existing policy: the migration
 * changes no decision). What a window holds is summed from the organization's holding rows
 * (`transactions_limits`: one organization's rows by time, so an agent's and an organization's
 * windows read only that organization's rows in the window). A raw transaction's maximum network
 * fee is kept in whole gwei, rounded up, so that a window's fee sum stays an exact integer in both
 * stores (a fee is at most 10^21 wei, 10^12 gwei) and never under-counts. `rule` keeps, as JSON,
 * the rule that denied a payment or sent it for approval (domain/policy.ts RuleInfo), so that a
 * repeated request gets the same answer. `split_recipients` lists the other addresses a payment
 * pays (an MPP split) as `,0x…,0x…,`, so a limit scoped to one of them counts the payment.
 *
 * PostgreSQL: the same columns and index. Never edit once landed: add the next migration.
 */

const sqlite = `
ALTER TABLE policies ADD COLUMN limits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE organizations ADD COLUMN limits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE transactions ADD COLUMN fee_gwei INTEGER NOT NULL DEFAULT 0
  CHECK (typeof(fee_gwei) = 'integer' AND fee_gwei >= 0);
ALTER TABLE transactions ADD COLUMN rule TEXT;
ALTER TABLE transactions ADD COLUMN split_recipients TEXT NOT NULL DEFAULT '';
CREATE INDEX transactions_limits ON transactions (org_id, cap_at) WHERE holds_cap = 1;
`;

const postgres = `
ALTER TABLE policies ADD COLUMN limits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE organizations ADD COLUMN limits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE transactions ADD COLUMN fee_gwei BIGINT NOT NULL DEFAULT 0 CHECK (fee_gwei >= 0);
ALTER TABLE transactions ADD COLUMN rule TEXT;
ALTER TABLE transactions ADD COLUMN split_recipients TEXT NOT NULL DEFAULT '';
CREATE INDEX transactions_limits ON transactions (org_id, cap_at) WHERE holds_cap = 1;
`;

export const migration: Migration = { version: 16, name: 'window_limits', sqlite, postgres };
