import { describe, expect, test } from 'vitest';
import {
  CAP_HOLDING_STATES, INITIAL_STATES, TRANSACTION_STATES, TRANSITIONS, canTransition, holdsCap, isTransactionState, type TransactionState,
} from '../../src/domain/transactionState.js';

/** The transaction state machine as a table: what the store and the database enforce. */
describe('transaction state machine', () => {
  test('behavior: the allowed moves are exactly these', () => {
    const moves = TRANSACTION_STATES.flatMap((from) => TRANSITIONS[from].map((to) => `${from}>${to}`)).sort();
    expect(moves).toEqual([
      'approved>denied', 'approved>expired', 'approved>signing',
      'failed>approved', 'failed>expired',
      'pending_approval>approved', 'pending_approval>denied', 'pending_approval>expired', 'pending_approval>signing',
      'signed>reverted',
      'signing>approved', 'signing>failed', 'signing>signed',
    ]);
    expect(canTransition('signing', 'signed')).toBe(true);
    expect(canTransition('signed', 'signing')).toBe(false);
    expect(canTransition('denied', 'approved')).toBe(false);
  });

  test('behavior: denied, expired, recorded and reverted are final, signed only moves to reverted; every state is reachable from a new row', () => {
    expect(TRANSACTION_STATES.filter((s) => TRANSITIONS[s].length === 0).sort()).toEqual(['denied', 'expired', 'recorded', 'reverted']);
    const reached = new Set<TransactionState>(INITIAL_STATES);
    for (let grew = true; grew;) {
      grew = false;
      for (const from of [...reached]) for (const to of TRANSITIONS[from]) if (!reached.has(to)) { reached.add(to); grew = true; }
    }
    expect([...reached].sort()).toEqual([...TRANSACTION_STATES].sort());
  });

  test('behavior: the cap is held in signing, signed, pending_approval and approved, and only the restart repair makes a released row hold it again', () => {
    expect(TRANSACTION_STATES.filter(holdsCap).sort()).toEqual([...CAP_HOLDING_STATES].sort());
    expect([...CAP_HOLDING_STATES].sort()).toEqual(['approved', 'pending_approval', 'signed', 'signing']);
    const regain = TRANSACTION_STATES.flatMap((from) => TRANSITIONS[from].filter((to) => !holdsCap(from) && holdsCap(to)).map((to) => `${from}>${to}`));
    expect(regain).toEqual(['failed>approved']);
    // A signed payment stops holding only when the chain says nothing was paid (migration 0008).
    expect(TRANSITIONS.signed).toEqual(['reverted']);
    expect(holdsCap('reverted')).toBe(false);
  });

  test('behavior: only the known names are states', () => {
    expect(TRANSACTION_STATES.every(isTransactionState)).toBe(true);
    for (const s of ['', 'SIGNED', 'pending', 'approved ', 'unknown']) expect(isTransactionState(s)).toBe(false);
  });
});
