import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import {
  INITIAL_STATES, TRANSACTION_STATES, TRANSITIONS, canTransition, holdsCap, type TransactionState,
} from '../../../src/domain/transactionState.js';
import { createPgStore } from '../../../src/store/pg/store.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

/**
 * PostgreSQL's trigger functions (pg migrations 0006 and 0008) refuse rows outside the state
 * machine exactly as SQLite's triggers do (test/store/transactionState.test.ts): raw SQL, no store
 * code in between, checked against src/domain/transactionState.ts for every pair of states.
 */
let d: TestDatabase;
let c: pg.Client;
let seq = 0;

beforeAll(async () => {
  d = await createTestDatabase();
  await (await createPgStore({ connectionString: d.url, poolSize: 1 })).close();
  c = new pg.Client(d.url);
  await c.connect();
  await c.query("INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES ('org_1', 'o', 3600, 1)");
  await c.query("INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES ('agt_1', 'org_1', 'a', 'active', 1, 1)");
});
afterAll(async () => {
  await c?.end();
  await d?.drop();
});
beforeEach(async () => {
  await c.query('DELETE FROM transactions');
});

async function insert(status: string, holds: number): Promise<string> {
  const id = `tx-${++seq}`;
  await c.query(`INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
    VALUES ($1, 'org_1', 'agt_1', 'eip3009', $2, 1, $3, 1, 1, 1)`, [id, status, holds]);
  return id;
}

async function setStatus(id: string, to: string, holds: number): Promise<void> {
  await c.query('UPDATE transactions SET status = $1, holds_cap = $2 WHERE id = $3', [to, holds, id]);
}

/** A row in `state`, reached from an initial state by allowed moves only (breadth first). */
async function rowIn(state: TransactionState): Promise<string> {
  const paths = new Map<TransactionState, TransactionState[]>(INITIAL_STATES.map((s) => [s, [s]]));
  for (const [from, path] of paths) for (const to of TRANSITIONS[from]) if (!paths.has(to)) paths.set(to, [...path, to]);
  const [first, ...moves] = paths.get(state)!;
  const id = await insert(first!, holdsCap(first!) ? 1 : 0);
  for (const to of moves) await setStatus(id, to, holdsCap(to) ? 1 : 0);
  return id;
}

async function statusOf(id: string): Promise<{ status: string; holds_cap: number }> {
  const r = (await c.query('SELECT status, holds_cap::int AS holds_cap FROM transactions WHERE id = $1', [id])).rows[0];
  return { status: r.status, holds_cap: r.holds_cap };
}

describe('the PostgreSQL database keeps transactions in the state machine', () => {
  test('behavior: every move the domain table allows is accepted and every other one is refused by PostgreSQL itself', async () => {
    let refused = 0;
    for (const from of TRANSACTION_STATES) {
      for (const to of TRANSACTION_STATES) {
        if (from === to) continue;
        const id = await rowIn(from);
        const attempt = () => setStatus(id, to, holdsCap(to) ? 1 : 0);
        if (canTransition(from, to)) {
          await attempt();
          expect(await statusOf(id), `${from} -> ${to}`).toEqual({ status: to, holds_cap: holdsCap(to) ? 1 : 0 });
        } else {
          await expect(attempt(), `${from} -> ${to}`).rejects.toThrow(/illegal status transition/);
          expect((await statusOf(id)).status).toBe(from);
          refused++;
        }
      }
    }
    expect(refused).toBe(9 * 8 - 13);
  });

  test('behavior: holds_cap other than what the state says is refused, on insert and on update', async () => {
    for (const state of INITIAL_STATES) {
      await expect(insert(state, holdsCap(state) ? 0 : 1), state).rejects.toThrow(/initial state/);
    }
    const signed = await rowIn('signed');
    await expect(c.query('UPDATE transactions SET holds_cap = 0 WHERE id = $1', [signed])).rejects.toThrow(/holds_cap/);
    const failed = await rowIn('failed');
    await expect(c.query('UPDATE transactions SET holds_cap = 1 WHERE id = $1', [failed])).rejects.toThrow(/holds_cap/);
    expect(await statusOf(signed)).toEqual({ status: 'signed', holds_cap: 1 });
    expect(await statusOf(failed)).toEqual({ status: 'failed', holds_cap: 0 });
  });

  test('behavior: a new row must start in an initial state; unknown statuses are refused', async () => {
    for (const state of ['approved', 'failed', 'expired', 'reverted', 'bogus', '', 'SIGNED']) {
      await expect(insert(state, state === 'approved' ? 1 : 0), state).rejects.toThrow(/initial state/);
      await expect(insert(state, 0), state).rejects.toThrow(/initial state/);
    }
    const id = await rowIn('signing');
    await expect(setStatus(id, 'bogus', 0)).rejects.toThrow(/illegal status transition/);
    expect((await c.query('SELECT COUNT(*)::int AS n FROM transactions')).rows[0].n).toBe(1);
  });

  test('behavior: a refusal is a check_violation (SQLSTATE 23514), never retried as a serialization failure', async () => {
    const id = await rowIn('denied');
    await expect(setStatus(id, 'signed', 1)).rejects.toMatchObject({ code: '23514' });
  });

  test('behavior: an UPDATE that does not touch status or holds_cap is not checked (UPDATE OF), like SQLite', async () => {
    const id = await rowIn('denied');
    await c.query("UPDATE transactions SET reason = 'x' WHERE id = $1", [id]);
    expect(await statusOf(id)).toEqual({ status: 'denied', holds_cap: 0 });
  });
});

describe('pg migration 0008: reverted and the chain states', () => {
  test('behavior: a signed row may become reverted (releasing the hold), and nothing else; submit_status takes only the chain states', async () => {
    const id = await rowIn('signed');
    await expect(setStatus(id, 'reverted', 1)).rejects.toThrow(/holds_cap/);
    await setStatus(id, 'reverted', 0);
    expect(await statusOf(id)).toEqual({ status: 'reverted', holds_cap: 0 });
    await expect(setStatus(id, 'signed', 1)).rejects.toThrow(/illegal status transition/);
    const other = await rowIn('signed');
    for (const s of ['pending', 'submitted', 'confirmed', 'reverted', 'dropped', 'replaced']) {
      await c.query('UPDATE transactions SET submit_status = $1 WHERE id = $2', [s, other]);
    }
    await expect(c.query("UPDATE transactions SET submit_status = 'mined' WHERE id = $1", [other])).rejects.toThrow(/check constraint/);
  });
});

describe('pg migration 0003: registry scopes', () => {
  test('behavior: a slug is never both shared and private, in either order, and a record keeps its slug and scope', async () => {
    const svc = (id: string, org: string | null, slug: string) => c.query(`INSERT INTO services (id, org_id, slug, name, description, category,
      logo_url, docs_url, payment_methods, endpoints, created_at, updated_at) VALUES ($1, $2, $3, 'n', 'd', 'c', '', '', '[]', '[]', 1, 1)`, [id, org, slug]);
    await svc('s1', null, 'shared-one');
    await expect(svc('s2', 'org_1', 'shared-one')).rejects.toThrow('registry slug is shared');
    await svc('s3', 'org_1', 'mine');
    await expect(svc('s4', null, 'mine')).rejects.toThrow('registry slug is held by a private record');
    await expect(c.query("UPDATE services SET slug = 'other' WHERE id = 's3'")).rejects.toThrow('a registry record keeps its slug and organization');
    await expect(c.query("UPDATE services SET org_id = NULL WHERE id = 's3'")).rejects.toThrow('a registry record keeps its slug and organization');
    await c.query("UPDATE services SET slug = 'mine', name = 'renamed' WHERE id = 's3'");
    await expect(svc('s5', null, 'shared-one')).rejects.toThrow(/duplicate key/);
  });
});
