/**
 * PostgreSQL twin of ../../migrations/0005_nonce_reuse.ts: gap-free raw-transaction nonces. A
 * reserved nonce is recorded on its row; released_nonces holds nonces handed back, reused lowest
 * first. The upgrade step (nonces of signed rows from their stored result, burned nonces below the
 * counter returned) is the same; json_extract becomes jsonb's #>>. Never edit once landed.
 */
export const sql = `
ALTER TABLE transactions ADD COLUMN nonce BIGINT;
UPDATE transactions SET nonce = CAST(result::jsonb #>> '{rawTransaction,nonce}' AS BIGINT)
  WHERE type = 'raw_transaction' AND status = 'signed' AND result IS NOT NULL;

CREATE TABLE released_nonces (
  org_id   TEXT COLLATE "C" NOT NULL REFERENCES organizations(id),
  chain_id BIGINT NOT NULL,
  nonce    BIGINT NOT NULL CHECK (nonce >= 0),
  PRIMARY KEY (org_id, chain_id, nonce)
);

WITH RECURSIVE handed(org_id, chain_id, nonce, next_nonce) AS (
  SELECT org_id, chain_id, 0::bigint, next_nonce FROM account_nonces WHERE next_nonce > 0
  UNION ALL
  SELECT org_id, chain_id, nonce + 1, next_nonce FROM handed WHERE nonce + 1 < next_nonce
)
INSERT INTO released_nonces (org_id, chain_id, nonce)
  SELECT h.org_id, h.chain_id, h.nonce FROM handed h
  WHERE NOT EXISTS (
    SELECT 1 FROM transactions t
    WHERE t.org_id = h.org_id AND t.chain_id = h.chain_id AND t.type = 'raw_transaction' AND t.nonce = h.nonce
      AND t.status IN ('signed', 'signing')
  );
`;
