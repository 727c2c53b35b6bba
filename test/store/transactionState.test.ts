import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import {
  INITIAL_STATES, TRANSACTION_STATES, TRANSITIONS, canTransition, holdsCap, type TransactionState,
} from '../../src/domain/transactionState.js';
import { openDatabase, type Db } from '../../src/store/db.js';

/**
 * The database itself refuses rows outside the state machine (migration 0006): raw SQL, with no
 * store code in between, is checked against src/domain/transactionState.ts for every pair of states.
 */
let dir: string;
let db: Db;
let seq = 0;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'paypolicy-states-'));
  db = openDatabase(join(dir, 'db.sqlite'));
  db.prepare("INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES ('org_1', 'o', 3600, 1)").run();
  db.prepare("INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES ('agt_1', 'org_1', 'a', 'active', 1, 1)").run();
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

function insert(status: string, holds: number): string {
  const id = `tx-${++seq}`;
  db.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
    VALUES (?, 'org_1', 'agt_1', 'eip3009', ?, 1, ?, 1, 1, 1)`).run(id, status, holds);
  return id;
}

function setStatus(id: string, to: string, holds: number): void {
  db.prepare('UPDATE transactions SET status = ?, holds_cap = ? WHERE id = ?').run(to, holds, id);
}

/** A row in `state`, reached from an initial state by allowed moves only (breadth first). */
function rowIn(state: TransactionState): string {
  const paths = new Map<TransactionState, TransactionState[]>(INITIAL_STATES.map((s) => [s, [s]]));
  for (const [from, path] of paths) for (const to of TRANSITIONS[from]) if (!paths.has(to)) paths.set(to, [...path, to]);
  const [first, ...moves] = paths.get(state)!;
  const id = insert(first!, holdsCap(first!) ? 1 : 0);
  for (const to of moves) setStatus(id, to, holdsCap(to) ? 1 : 0);
  return id;
}

const statusOf = (id: string) => (db.prepare('SELECT status, holds_cap FROM transactions WHERE id = ?').get(id) as { status: string; holds_cap: number });

describe('the database keeps transactions in the state machine', () => {
  test('behavior: every move the domain table allows is accepted and every other one is refused by SQLite itself', () => {
    let refused = 0;
    for (const from of TRANSACTION_STATES) {
      for (const to of TRANSACTION_STATES) {
        if (from === to) continue;
        const id = rowIn(from);
        const attempt = () => setStatus(id, to, holdsCap(to) ? 1 : 0);
        if (canTransition(from, to)) {
          attempt();
          expect(statusOf(id)).toEqual({ status: to, holds_cap: holdsCap(to) ? 1 : 0 });
        } else {
          expect(attempt, `${from} -> ${to}`).toThrow(/illegal status transition/);
          expect(statusOf(id).status).toBe(from);
          refused++;
        }
      }
    }
    expect(refused).toBe(9 * 8 - 13);
  });

  test('behavior: holds_cap other than what the state says is refused, on insert and on update', () => {
    for (const state of INITIAL_STATES) {
      expect(() => insert(state, holdsCap(state) ? 0 : 1), state).toThrow(/initial state/);
    }
    const signed = rowIn('signed');
    expect(() => db.prepare('UPDATE transactions SET holds_cap = 0 WHERE id = ?').run(signed)).toThrow(/holds_cap/);
    const failed = rowIn('failed');
    expect(() => db.prepare('UPDATE transactions SET holds_cap = 1 WHERE id = ?').run(failed)).toThrow(/holds_cap/);
    expect(statusOf(signed)).toEqual({ status: 'signed', holds_cap: 1 });
    expect(statusOf(failed)).toEqual({ status: 'failed', holds_cap: 0 });
  });

  test('behavior: a new row must start in an initial state; unknown statuses are refused', () => {
    for (const state of ['approved', 'failed', 'expired', 'reverted', 'bogus', '', 'SIGNED']) {
      expect(() => insert(state, state === 'approved' ? 1 : 0), state).toThrow(/initial state/);
      expect(() => insert(state, 0), state).toThrow(/initial state/);
    }
    const id = rowIn('signing');
    expect(() => setStatus(id, 'bogus', 0)).toThrow(/illegal status transition/);
    expect((db.prepare('SELECT COUNT(*) AS n FROM transactions').get() as { n: number }).n).toBe(1);
  });
});

describe('migration 0008: reverted and the chain states', () => {
  test('behavior: a signed row may become reverted (releasing the hold), and nothing else; submit_status takes only the chain states', () => {
    const id = rowIn('signed');
    expect(() => setStatus(id, 'reverted', 1)).toThrow(/holds_cap/);
    setStatus(id, 'reverted', 0);
    expect(statusOf(id)).toEqual({ status: 'reverted', holds_cap: 0 });
    expect(() => setStatus(id, 'signed', 1)).toThrow(/illegal status transition/);
    const other = rowIn('signed');
    for (const s of ['pending', 'submitted', 'confirmed', 'reverted', 'dropped', 'replaced']) {
      db.prepare('UPDATE transactions SET submit_status = ? WHERE id = ?').run(s, other);
    }
    expect(() => db.prepare("UPDATE transactions SET submit_status = 'mined' WHERE id = ?").run(other)).toThrow(/CHECK/);
  });
});
