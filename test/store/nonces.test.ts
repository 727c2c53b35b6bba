import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { openDatabase, writeTxn, type Db } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { createPaymentStore } from '../../src/store/payments.js';
import type { PaymentRow } from '../../src/store/port.js';

const dirs: string[] = [];
function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-nonce-'));
  dirs.push(dir);
  return join(dir, 'paypolicy.db');
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const ORG = 'org_n';
const AGENT = 'agt_n';
const CHAIN = 8453;

function seed(db: Db): void {
  db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, 3600, 0)').run(ORG, 'n');
  db.prepare(`INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES (?, ?, 'a', 'active', 0, 0)`).run(AGENT, ORG);
}

let seq = 0;
function rawRow(): PaymentRow & { status: 'signing' } {
  seq++;
  return {
    id: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`, orgId: ORG, agentId: AGENT, type: 'raw_transaction', status: 'signing',
    chainId: CHAIN, recipient: '0x' + '11'.repeat(20), amountMicros: 1n, reason: '', serviceSlug: '', resourceUrl: '',
    idempotencyKey: null, requestHash: 'h', request: '{}', result: null, approvalId: null, createdAt: 1,
  };
}

/** Reserves a nonce the way payments/decide.ts does: insert the `signing` row, then take a nonce for it. */
function reserve(db: Db, payments: ReturnType<typeof createPaymentStore>): { id: string; nonce: number } {
  return writeTxn(db, () => {
    const row = rawRow();
    payments.insert(row);
    return { id: row.id, nonce: payments.allocateNonce(ORG, CHAIN, row.id) };
  });
}

describe('allocateNonce', () => {
  test('behavior: a failed reservation hands its nonce back and the lowest returned nonce is reused first', () => {
    const db = openDatabase(tempDb());
    seed(db);
    const payments = createPaymentStore(db);
    const r = [0, 1, 2, 3].map(() => reserve(db, payments));
    expect(r.map((x) => x.nonce)).toEqual([0, 1, 2, 3]);
    payments.settleSigned(r[0]!.id, '{}', 2);
    payments.markFailed(r[3]!.id, 'x', 2);
    payments.markFailed(r[1]!.id, 'x', 2);
    payments.settleSigned(r[2]!.id, '{}', 2);
    expect(reserve(db, payments).nonce).toBe(1);
    expect(reserve(db, payments).nonce).toBe(3);
    expect(reserve(db, payments).nonce).toBe(4);
    db.close();
  });

  test('behavior: a signed nonce is never handed back, even if markFailed is called for its row later', () => {
    const db = openDatabase(tempDb());
    seed(db);
    const payments = createPaymentStore(db);
    const a = reserve(db, payments);
    payments.settleSigned(a.id, '{}', 2);
    expect(payments.markFailed(a.id, 'late', 3)).toBe(false);
    expect(reserve(db, payments).nonce).toBe(1);
    db.close();
  });

  test('behavior: rows cut off by a crash release their nonces at start-up, so the signed nonces stay gap-free', () => {
    const file = tempDb();
    let db = openDatabase(file);
    seed(db);
    let payments = createPaymentStore(db);
    const r = [0, 1, 2, 3, 4].map(() => reserve(db, payments));
    payments.settleSigned(r[0]!.id, '{}', 2);
    payments.settleSigned(r[4]!.id, '{}', 2);
    db.close(); // 1, 2 and 3 were still signing: a crash
    db = openDatabase(file);
    payments = createPaymentStore(db);
    expect(payments.failInterrupted(5)).toBe(3);
    const again = [0, 1, 2].map(() => reserve(db, payments));
    expect(again.map((x) => x.nonce)).toEqual([1, 2, 3]);
    for (const x of again) payments.settleSigned(x.id, '{}', 6);
    const signed = (db.prepare(`SELECT nonce FROM transactions WHERE status = 'signed' ORDER BY nonce`).all() as { nonce: number }[]).map((x) => x.nonce);
    expect(signed).toEqual([0, 1, 2, 3, 4]);
    db.close();
  });

  test('error: a nonce cannot be taken for a row that is not signing', () => {
    const db = openDatabase(tempDb());
    seed(db);
    const payments = createPaymentStore(db);
    expect(() => writeTxn(db, () => payments.allocateNonce(ORG, CHAIN, 'no-such-row'))).toThrow(/no signing row/);
    // The failed transaction handed nothing out.
    expect(reserve(db, payments).nonce).toBe(0);
    db.close();
  });
});

describe('migration nonce_reuse', () => {
  test('behavior: nonces burned before the upgrade are returned, signed ones are kept', () => {
    const file = tempDb();
    const old = new Database(file);
    old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const m of MIGRATIONS.filter((x) => x.version <= 2)) {
      old.exec(m.sqlite);
      old.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
    }
    seed(old);
    // A schema-2 ledger that handed out 0..4; 0, 2 and 4 were signed, 1 and 3 burned by failures.
    old.prepare('INSERT INTO account_nonces (org_id, chain_id, next_nonce) VALUES (?, ?, 5)').run(ORG, CHAIN);
    const ins = old.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, chain_id, amount_micros, holds_cap, cap_at, result, created_at, updated_at)
      VALUES (?, ?, ?, 'raw_transaction', ?, ?, 1, 0, 0, ?, 0, 0)`);
    for (const [id, status, nonce] of [['a', 'signed', 0], ['b', 'failed', null], ['c', 'signed', 2], ['d', 'failed', null], ['e', 'signed', 4]] as const) {
      ins.run(id, ORG, AGENT, status, CHAIN, nonce === null ? null : JSON.stringify({ type: 'raw_transaction', rawTransaction: { nonce: String(nonce) } }));
    }
    old.close();

    const db = openDatabase(file);
    const payments = createPaymentStore(db);
    expect(db.prepare(`SELECT id, nonce FROM transactions ORDER BY id`).all()).toEqual([
      { id: 'a', nonce: 0 }, { id: 'b', nonce: null }, { id: 'c', nonce: 2 }, { id: 'd', nonce: null }, { id: 'e', nonce: 4 },
    ]);
    expect([0, 1, 2].map(() => reserve(db, payments).nonce)).toEqual([1, 3, 5]);
    db.close();
  });
});
