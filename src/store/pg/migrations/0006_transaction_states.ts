/**
 * PostgreSQL twin of ../../migrations/0006_transaction_states.ts: the database keeps ledger rows
 * inside the transaction state machine (src/domain/transactionState.ts). A new row must start in
 * an initial state, a status may only move along an allowed transition, and holds_cap must be 1
 * exactly in the states that hold the cap. The rules are SQLite's trigger conditions, written as
 * PL/pgSQL; a NULL anywhere refuses (IS NOT TRUE) where SQLite's WHEN would let it through, which
 * the NOT NULL columns make moot. The messages are the same, so a refusal reads alike on both
 * stores. test/store/pg/transactionState.test.ts tries every (from, to) pair. Never edit once landed.
 */
export const sql = `
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
