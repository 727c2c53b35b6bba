/**
 * PostgreSQL twin of ../../migrations/0008_chain_tracking.ts: submit_status gains the chain's
 * later states (rebuilt through a new column, as on SQLite, so both stores take the same steps),
 * the chain-side columns, chain_attempts, and the state machine's new final state `reverted`
 * (signed → reverted). One addition: chain_attempts.seq, an identity column standing in for
 * SQLite's rowid as the tie-break of attempts recorded in the same millisecond (payments.attempts
 * orders by created_at, then insertion). Never edit once landed.
 */
export const sql = `
ALTER TABLE transactions ADD COLUMN chain_status TEXT COLLATE "C"
  CHECK (chain_status IN ('pending', 'submitted', 'confirmed', 'reverted', 'dropped', 'replaced'));
UPDATE transactions SET chain_status = submit_status WHERE submit_status IS NOT NULL;
DROP INDEX transactions_unsubmitted;
ALTER TABLE transactions DROP COLUMN submit_status;
ALTER TABLE transactions RENAME COLUMN chain_status TO submit_status;
CREATE INDEX transactions_unsubmitted ON transactions (chain_id, nonce) WHERE submit_status = 'pending';
CREATE INDEX transactions_in_flight ON transactions (chain_id, nonce)
  WHERE submit_status IN ('submitted', 'dropped', 'replaced');

ALTER TABLE transactions ADD COLUMN block_number BIGINT;
ALTER TABLE transactions ADD COLUMN confirmations BIGINT;
ALTER TABLE transactions ADD COLUMN network_fee_wei TEXT COLLATE "C"
  CHECK (network_fee_wei IS NULL OR (length(network_fee_wei) BETWEEN 1 AND 40 AND network_fee_wei !~ '[^0-9]'));
ALTER TABLE transactions ADD COLUMN broadcast_at BIGINT;

CREATE TABLE chain_attempts (
  transaction_id           TEXT COLLATE "C" NOT NULL REFERENCES transactions(id),
  hash                     TEXT COLLATE "C" NOT NULL,
  kind                     TEXT COLLATE "C" NOT NULL CHECK (kind IN ('bump', 'filler')),
  serialized               TEXT COLLATE "C" NOT NULL,
  gas                      TEXT COLLATE "C" NOT NULL,
  max_fee_per_gas          TEXT COLLATE "C" NOT NULL,
  max_priority_fee_per_gas TEXT COLLATE "C" NOT NULL,
  created_at               BIGINT NOT NULL,
  seq                      BIGINT GENERATED ALWAYS AS IDENTITY,
  PRIMARY KEY (transaction_id, hash)
);

DROP TRIGGER transactions_state_insert ON transactions;
DROP TRIGGER transactions_state_update ON transactions;

CREATE OR REPLACE FUNCTION transactions_state_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF (CASE NEW.status
      WHEN 'signing' THEN NEW.holds_cap = 1
      WHEN 'signed' THEN NEW.holds_cap = 1
      WHEN 'pending_approval' THEN NEW.holds_cap = 1
      WHEN 'denied' THEN NEW.holds_cap = 0
      WHEN 'recorded' THEN NEW.holds_cap = 0
      ELSE FALSE END) IS NOT TRUE THEN
    RAISE EXCEPTION 'transaction state: a new row must start in an initial state, holding the cap exactly when that state does'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $fn$;
CREATE TRIGGER transactions_state_insert BEFORE INSERT ON transactions
  FOR EACH ROW EXECUTE FUNCTION transactions_state_insert();

CREATE OR REPLACE FUNCTION transactions_state_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF (NEW.holds_cap = 1) IS DISTINCT FROM (NEW.status IN ('signing', 'signed', 'pending_approval', 'approved'))
    OR (NEW.status IS DISTINCT FROM OLD.status AND (CASE OLD.status
      WHEN 'signing' THEN NEW.status IN ('signed', 'failed', 'approved')
      WHEN 'signed' THEN NEW.status = 'reverted'
      WHEN 'failed' THEN NEW.status IN ('approved', 'expired')
      WHEN 'pending_approval' THEN NEW.status IN ('signing', 'approved', 'denied', 'expired')
      WHEN 'approved' THEN NEW.status IN ('signing', 'denied', 'expired')
      ELSE FALSE END) IS NOT TRUE) THEN
    RAISE EXCEPTION 'transaction state: illegal status transition, or holds_cap not what the state says'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $fn$;
CREATE TRIGGER transactions_state_update BEFORE UPDATE OF status, holds_cap ON transactions
  FOR EACH ROW EXECUTE FUNCTION transactions_state_update();
`;
