/**
 * PostgreSQL twin of ../../migrations/0009_treasury_funds.ts: a partial index over the rows that
 * hold a nonce, so the treasury balance check's sum of unmined raw transactions is a range scan.
 * Never edit once landed.
 */
export const sql = `
CREATE INDEX transactions_raw_nonce ON transactions (org_id, chain_id, nonce) WHERE nonce IS NOT NULL;
`;
