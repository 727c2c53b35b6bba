/**
 * PostgreSQL twin of ../../migrations/0004_network_fee.ts: the per-payment network-fee ceiling,
 * a decimal TEXT of 1 to 22 digits (SQLite's NOT GLOB '*[^0-9]*' is the regex !~ '[^0-9]').
 * Never edit once landed.
 */
export const sql = `
ALTER TABLE policies ADD COLUMN max_network_fee_wei TEXT COLLATE "C" NOT NULL DEFAULT '1000000000000000'
  CHECK (length(max_network_fee_wei) BETWEEN 1 AND 22 AND max_network_fee_wei !~ '[^0-9]');
`;
