/**
 * The database itself keeps ledger rows inside the transaction state machine
 * (src/domain/transactionState.ts): a new row must start in an initial state, a status may only
 * move along an allowed transition, and holds_cap must be 1 exactly in the states that hold the
 * cap. Triggers rather than a CHECK: a CHECK cannot see the old status, so it could not refuse an
 * illegal move, and adding one to an existing column would mean rebuilding the table. Existing
 * rows are left as they are. test/store/transactionState.test.ts tries every (from, to) pair
 * against these triggers and the domain table. Never edit once landed: add the next migration.
 */
export const sql = `
CREATE TRIGGER transactions_state_insert BEFORE INSERT ON transactions
WHEN NEW.status NOT IN ('signing', 'signed', 'pending_approval', 'denied', 'recorded')
  OR NEW.holds_cap IS NOT (NEW.status IN ('signing', 'signed', 'pending_approval', 'approved'))
BEGIN
  SELECT RAISE(ABORT, 'transaction state: a new row must start in an initial state, holding the cap exactly when that state does');
END;

CREATE TRIGGER transactions_state_update BEFORE UPDATE OF status, holds_cap ON transactions
WHEN NEW.holds_cap IS NOT (NEW.status IN ('signing', 'signed', 'pending_approval', 'approved'))
  OR (NEW.status IS NOT OLD.status AND OLD.status || '>' || NEW.status NOT IN (
    'signing>signed', 'signing>failed', 'signing>approved',
    'failed>approved', 'failed>expired',
    'pending_approval>signing', 'pending_approval>approved', 'pending_approval>denied', 'pending_approval>expired',
    'approved>signing', 'approved>denied', 'approved>expired'))
BEGIN
  SELECT RAISE(ABORT, 'transaction state: illegal status transition, or holds_cap not what the state says');
END;
`;
