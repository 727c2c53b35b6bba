import type { Migration } from './migration.js';

/**
 * On-chain submission of raw transactions. A `signed` raw transaction whose
 * chain has a configured RPC endpoint is settled with submit_status 'pending' (in the same commit
 * as its signature) and becomes 'submitted' with its tx_hash once a node accepted it. The row's
 * status stays `signed` (and keeps holding the cap, as every signed payment does): submission is
 * a column, not a state, so the state machine and its triggers (0006) are unchanged. Rows signed
 * without an endpoint keep submit_status NULL and are never broadcast by the service.
 *
 *
 * PostgreSQL: the same columns and partial index. Never edit once landed: add the next migration.
 */

const sqlite = `
ALTER TABLE transactions ADD COLUMN submit_status TEXT CHECK (submit_status IN ('pending', 'submitted'));
ALTER TABLE transactions ADD COLUMN tx_hash TEXT;
CREATE INDEX transactions_unsubmitted ON transactions (chain_id, nonce) WHERE submit_status = 'pending';
`;

const postgres = `
ALTER TABLE transactions ADD COLUMN submit_status TEXT COLLATE "C" CHECK (submit_status IN ('pending', 'submitted'));
ALTER TABLE transactions ADD COLUMN tx_hash TEXT COLLATE "C";
CREATE INDEX transactions_unsubmitted ON transactions (chain_id, nonce) WHERE submit_status = 'pending';
`;

export const migration: Migration = { version: 7, name: 'submission', sqlite, postgres };
