import type { Migration } from './migration.js';

/**
 * A per-payment network-fee ceiling on every policy: the most gas × max fee per gas (wei) a
 * payment may carry. Existing and new policies start at 10^15 wei (0.001 ETH). A decimal TEXT
 * like every token amount; the CHECK keeps it a plain integer of at most 22 digits (the use case
 * bounds it at 10^21).
 *
 * PostgreSQL: the same ceiling; SQLite's NOT GLOB '*[^0-9]*' is the regex !~ '[^0-9]'. Never edit
 * once landed: add the next migration.
 */

const sqlite = `
ALTER TABLE policies ADD COLUMN max_network_fee_wei TEXT NOT NULL DEFAULT '1000000000000000'
  CHECK (length(max_network_fee_wei) BETWEEN 1 AND 22 AND max_network_fee_wei NOT GLOB '*[^0-9]*');
`;

const postgres = `
ALTER TABLE policies ADD COLUMN max_network_fee_wei TEXT COLLATE "C" NOT NULL DEFAULT '1000000000000000'
  CHECK (length(max_network_fee_wei) BETWEEN 1 AND 22 AND max_network_fee_wei !~ '[^0-9]');
`;

export const migration: Migration = { version: 4, name: 'network_fee', sqlite, postgres };
