import type { Migration } from './migration.js';

/**
 * Tracking submitted raw transactions to finality. docs/onchain.md.
 *
 * - submit_status gains the chain's later states: pending → submitted → confirmed | reverted,
 *   and on the way dropped (the node forgot every version; re-broadcast) and replaced (a fee bump
 *   or a nonce filler with the same nonce is the current version). SQLite cannot change a column's
 *   CHECK in place, so the column is rebuilt: a new column, the values copied, the partial index
 *   dropped, the old column dropped, the new one renamed, the index recreated.
 * - tx_hash is the current version's hash (the one mined, once one is); block_number,
 *   confirmations (as last counted), network_fee_wei (gasUsed × effectiveGasPrice of the mined
 *   version, decimal TEXT like every wei amount) and broadcast_at (when the current version was
 *   last broadcast: the fee-bump timer) describe the chain side.
 * - chain_attempts holds every version after the original (the original's bytes are the row's
 *   result, recorded with the signature): fee bumps and nonce fillers, each committed before it
 *   is broadcast. Receipts are looked up for the original and every attempt.
 * - A new final state `reverted` (signed → reverted, not holding the cap): the receipt said the
 *   transfer failed, or the node refused it for good and its nonce was filled by a no-op. 0006's
 *   triggers are replaced by ones that know it (test/store/transactionState.test.ts checks them
 *   against src/domain/transactionState.ts).
 *
 * PostgreSQL: the same steps (submit_status rebuilt through a new column). chain_attempts also has
 * seq, an identity column standing in for SQLite's rowid as the tie-break of attempts recorded in
 * the same millisecond (payments.attempts orders by created_at, then insertion). Never edit once
 * landed: add the next migration.
 */

const sqlite = `
ALTER TABLE transactions ADD COLUMN chain_status TEXT
  CHECK (chain_status IN ('pending', 'submitted', 'confirmed', 'reverted', 'dropped', 'replaced'));
UPDATE transactions SET chain_status = submit_status WHERE submit_status IS NOT NULL;
DROP INDEX transactions_unsubmitted;
ALTER TABLE transactions DROP COLUMN submit_status;
ALTER TABLE transactions RENAME COLUMN chain_status TO submit_status;
CREATE INDEX transactions_unsubmitted ON transactions (chain_id, nonce) WHERE submit_status = 'pending';
CREATE INDEX transactions_in_flight ON transactions (chain_id, nonce)
  WHERE submit_status IN ('submitted', 'dropped', 'replaced');

ALTER TABLE transactions ADD COLUMN block_number INTEGER;
ALTER TABLE transactions ADD COLUMN confirmations INTEGER;
ALTER TABLE transactions ADD COLUMN network_fee_wei TEXT
  CHECK (network_fee_wei IS NULL OR (length(network_fee_wei) BETWEEN 1 AND 40 AND network_fee_wei NOT GLOB '*[^0-9]*'));
ALTER TABLE transactions ADD COLUMN broadcast_at INTEGER;

CREATE TABLE chain_attempts (
  transaction_id           TEXT NOT NULL REFERENCES transactions(id),
  hash                     TEXT NOT NULL,
  kind                     TEXT NOT NULL CHECK (kind IN ('bump', 'filler')),
  serialized               TEXT NOT NULL,
  gas                      TEXT NOT NULL,
  max_fee_per_gas          TEXT NOT NULL,
  max_priority_fee_per_gas TEXT NOT NULL,
  created_at               INTEGER NOT NULL,
  PRIMARY KEY (transaction_id, hash)
) STRICT;

DROP TRIGGER transactions_state_insert;
DROP TRIGGER transactions_state_update;

CREATE TRIGGER transactions_state_insert BEFORE INSERT ON transactions
WHEN NOT (CASE NEW.status
    WHEN 'signing' THEN NEW.holds_cap = 1
    WHEN 'signed' THEN NEW.holds_cap = 1
    WHEN 'pending_approval' THEN NEW.holds_cap = 1
    WHEN 'denied' THEN NEW.holds_cap = 0
    WHEN 'recorded' THEN NEW.holds_cap = 0
    ELSE 0 END)
BEGIN
  SELECT RAISE(ABORT, 'transaction state: a new row must start in an initial state, holding the cap exactly when that state does');
END;

CREATE TRIGGER transactions_state_update BEFORE UPDATE OF status, holds_cap ON transactions
WHEN NEW.holds_cap IS NOT (NEW.status = 'signing' OR NEW.status = 'signed' OR NEW.status = 'pending_approval' OR NEW.status = 'approved')
  OR (NEW.status IS NOT OLD.status AND NOT (CASE OLD.status
    WHEN 'signing' THEN NEW.status = 'signed' OR NEW.status = 'failed' OR NEW.status = 'approved'
    WHEN 'signed' THEN NEW.status = 'reverted'
    WHEN 'failed' THEN NEW.status = 'approved' OR NEW.status = 'expired'
    WHEN 'pending_approval' THEN NEW.status = 'signing' OR NEW.status = 'approved' OR NEW.status = 'denied' OR NEW.status = 'expired'
    WHEN 'approved' THEN NEW.status = 'signing' OR NEW.status = 'denied' OR NEW.status = 'expired'
    ELSE 0 END))
BEGIN
  SELECT RAISE(ABORT, 'transaction state: illegal status transition, or holds_cap not what the state says');
END;
`;

const postgres = `
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

export const migration: Migration = { version: 8, name: 'chain_tracking', sqlite, postgres };
