import type { Migration } from './migration.js';

/**
 * Gap-free raw-transaction nonces. A reserved nonce is recorded on its row, so a reservation that
 * ends without a signature (signing failed, or a crash cut it off) can hand its nonce back; the
 * next reservation for that (treasury, chain) takes the lowest returned nonce before a new one.
 * Without that, every later transaction from the treasury would wait forever behind the gap.
 *
 * On upgrade, signed rows get their nonce from the stored result, and every nonce below the
 * counter that no signed row holds (burned by earlier failures) is returned, so existing gaps are
 * filled first.
 *
 * PostgreSQL: the same tables and upgrade step; json_extract becomes jsonb's #>>. Never edit once
 * landed: add the next migration.
 */

const sqlite = `
ALTER TABLE transactions ADD COLUMN nonce INTEGER;
UPDATE transactions SET nonce = CAST(json_extract(result, '$.rawTransaction.nonce') AS INTEGER)
  WHERE type = 'raw_transaction' AND status = 'signed' AND result IS NOT NULL;

CREATE TABLE released_nonces (
  org_id   TEXT NOT NULL REFERENCES organizations(id),
  chain_id INTEGER NOT NULL,
  nonce    INTEGER NOT NULL CHECK (nonce >= 0),
  PRIMARY KEY (org_id, chain_id, nonce)
) STRICT;

WITH RECURSIVE handed(org_id, chain_id, nonce, next_nonce) AS (
  SELECT org_id, chain_id, 0, next_nonce FROM account_nonces WHERE next_nonce > 0
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

const postgres = `
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

export const migration: Migration = { version: 5, name: 'nonce_reuse', sqlite, postgres };
