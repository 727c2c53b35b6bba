import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { limitStatesSql } from '../../../src/store/limitStates.js';
import { CAP_SUM } from '../../../src/store/pg/payments.js';
import type { Statement } from '../../../src/store/pg/sql.js';
import { createPgStore } from '../../../src/store/pg/store.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

// Under SERIALIZABLE a statement's predicate locks cover what its plan reads: a per-agent sum
// that scans an organization-wide or time-wide index range makes every other agent's new payment
// a read/write conflict, and the deciding writes fail each other's commits. These plans are read
// on a freshly migrated, never analyzed database, as a new deployment's first payments see it.

let db: TestDatabase;
let client: pg.Client;
beforeAll(async () => {
  db = await createTestDatabase();
  await (await createPgStore({ connectionString: db.url, poolSize: 1 })).close();
  client = new pg.Client(db.url);
  await client.connect();
});
afterAll(async () => {
  await client?.end();
  await db?.drop();
});

async function plan(s: Statement, types: string[], args: string[]): Promise<string> {
  await client.query(`PREPARE planned(${types.join(', ')}) AS ${s.text}`);
  try {
    const r = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE planned(${args.join(', ')})`);
    return r.rows.map((x) => x['QUERY PLAN']).join('\n');
  } finally {
    await client.query('DEALLOCATE planned');
  }
}

describe('PostgreSQL plans of the deciding write', () => {
  test('behavior: the cap sum reads the agent\'s own rows through transactions_cap, and overdue approvals by transaction id, never the organization index', async () => {
    const p = await plan(CAP_SUM, ['text', 'bigint', 'bigint', 'bigint', 'bigint'], ["'agt_1'", '1', '2', '3', '4']);
    expect(p).toMatch(/transactions_cap on transactions\s+\(.*\)\s+Index Cond: \(\(agent_id = 'agt_1'::text\)/);
    expect(p).not.toContain('transactions_limits');
    expect(p).toMatch(/transactions_pkey on transactions t[\s\S]*Index Cond: \(id = a\.transaction_id\)/);
  });

  test('behavior: the window limits\' sums seek the organization\'s holding rows by org_id', async () => {
    const p = await plan({ name: 'scan', text: limitStatesSql('postgres').scan }, ['text', 'bigint', 'bigint', 'text', 'text'], ["'org_1'", '1', '2', 'NULL', 'NULL']);
    expect(p).toMatch(/transactions_limits on transactions t[\s\S]*Index Cond: \(\(org_id = 'org_1'::text\) AND \(holds_cap = 1\)/);
  });

  test('behavior: overdue approvals are found from the approvals, never by reading a window or every pending payment', async () => {
    const p = await plan({ name: 'overdue', text: limitStatesSql('postgres').overdue }, ['text', 'bigint'], ["'org_1'", '2']);
    // On a table this small a sequential scan is the cheapest plan; what must never happen is a
    // scan by an organization's window or of every pending payment.
    expect(p).toMatch(/approvals_org_pending on approvals a[\s\S]*Index Cond: \(\(org_id = 'org_1'::text\)/);
    expect(p).not.toContain('transactions_limits');
    expect(p).not.toContain('transactions_by_status');
  });
});
