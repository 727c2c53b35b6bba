import type { Migration } from './migration.js';

/**
 * The treasury balance check (app/organizations/treasury.ts) sums, inside the write that reserves each raw
 * transaction's nonce, the raw transactions of one (organization, chain) whose nonce the chain has
 * not mined yet (store/treasuryFunds.ts). Only raw transactions hold a nonce, so a partial index
 * on them keeps that a short range scan instead of a walk over the organization's whole ledger.
 *
 *
 * PostgreSQL: the same partial index. Never edit once landed: add the next migration.
 */

const sqlite = `
CREATE INDEX transactions_raw_nonce ON transactions (org_id, chain_id, nonce) WHERE nonce IS NOT NULL;
`;

const postgres = `
CREATE INDEX transactions_raw_nonce ON transactions (org_id, chain_id, nonce) WHERE nonce IS NOT NULL;
`;

export const migration: Migration = { version: 9, name: 'treasury_funds', sqlite, postgres };
