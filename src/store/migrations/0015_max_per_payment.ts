import type { Migration } from './migration.js';

/**
 * A hard per-payment maximum on every policy, in micro-USD: a payment above it is denied outright,
 * never queued for approval. NULL (every existing policy) is no maximum, so the migration changes
 * no decision. Micro-USD like the cap and the threshold (an INTEGER within the ledger's bound).
 *
 * PostgreSQL: the same column as BIGINT. Never edit once landed: add the next migration.
 */

const sqlite = `
ALTER TABLE policies ADD COLUMN max_per_payment_micros INTEGER
  CHECK (max_per_payment_micros IS NULL OR (typeof(max_per_payment_micros) = 'integer' AND max_per_payment_micros >= 0));
`;

const postgres = `
ALTER TABLE policies ADD COLUMN max_per_payment_micros BIGINT
  CHECK (max_per_payment_micros IS NULL OR max_per_payment_micros >= 0);
`;

export const migration: Migration = { version: 15, name: 'max_per_payment', sqlite, postgres };
