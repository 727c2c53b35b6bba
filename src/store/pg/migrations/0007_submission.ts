/**
 * PostgreSQL twin of ../../migrations/0007_submission.ts: on-chain submission of raw transactions
 * as columns of a signed row (submit_status pending → submitted, tx_hash), with the partial index
 * over rows waiting for broadcast. Never edit once landed.
 */
export const sql = `
ALTER TABLE transactions ADD COLUMN submit_status TEXT COLLATE "C" CHECK (submit_status IN ('pending', 'submitted'));
ALTER TABLE transactions ADD COLUMN tx_hash TEXT COLLATE "C";
CREATE INDEX transactions_unsubmitted ON transactions (chain_id, nonce) WHERE submit_status = 'pending';
`;
