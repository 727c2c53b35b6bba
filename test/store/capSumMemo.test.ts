import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import { CAP_WINDOW_MS } from '../../src/app/payments/policyFacts.js';
import { createCapRowsMover } from '../../src/store/capRows.js';
import { writeTxn } from '../../src/store/db.js';
import { openStore } from '../../src/store/store.js';

/**
 * The reader's cap sums are remembered (src/store/payments.ts CapSumMemo): reused while the
 * writer has changed no row and the clock stays where no row can leave the 24 h window and no
 * pending approval can fall due. Checked against the sum over the rows, read on a connection of
 * its own after every step of random sequences of payments, approvals, decisions, moves of the
 * cap-rows horizon, uncommitted writes and clock moves: forwards to the very millisecond a row
 * leaves or an approval falls due, and backwards.
 */

const H = 3_600_000;
const W = CAP_WINDOW_MS;
const ORG = 'org_memo';
const AGENTS = ['agt_memo_a', 'agt_memo_b', 'agt_memo_c'];

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-capmemo-'));
  dirs.push(dir);
  return join(dir, 'paypolicy.db');
}

/** A deterministic generator, so a failing sequence can be replayed from its seed. */
function rng(seed: number) {
  let x = seed >>> 0 || 1;
  return (n: number) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

/** What the cap counts at `now`, from the rows themselves: holding rows after `since`, less pending approvals past their deadline. */
function expected(plain: Database.Database, agentId: string, now: number): bigint {
  const since = now - W;
  const held = plain.prepare('SELECT COALESCE(SUM(amount_micros), 0) FROM transactions WHERE agent_id = ? AND holds_cap = 1 AND cap_at > ?').pluck().safeIntegers(true).get(agentId, since) as bigint;
  const overdue = plain.prepare(`SELECT COALESCE(SUM(t.amount_micros), 0) FROM approvals a JOIN transactions t ON t.id = a.transaction_id
    WHERE a.agent_id = ? AND a.status = 'pending' AND a.expires_at <= ? AND t.holds_cap = 1 AND t.cap_at > ?`).pluck().safeIntegers(true).get(agentId, now, since) as bigint;
  return held - overdue;
}

function setup(file: string, at: number) {
  const store = openStore(file, { capRows: false });
  store.db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)').run(ORG, 'Memo', 3600, at);
  for (const id of AGENTS) store.db.prepare('INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)').run(id, ORG, id, 'active', at, at);
  const plain = new Database(file, { readonly: true });
  return { store, plain };
}

describe('cap sum memo', () => {
  test('behavior: random ledgers and clocks, the remembered sum always equals the sum over the rows', async () => {
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const next = rng(seed * 7919);
      const T0 = 1_800_000_000_000 + seed * 977;
      let now = T0;
      const { store, plain } = setup(tempFile(), now);
      const mover = createCapRowsMover(store.db);
      const exits: number[] = [];
      const deadlines: number[] = [];
      const pending: string[] = [];
      let n = 0;
      try {
        for (let step = 0; step < 220; step++) {
          const op = next(12);
          const agent = AGENTS[next(AGENTS.length)]!;
          const id = `tx_${seed}_${n++}`;
          if (op <= 2) {
            // A signed payment anywhere from 30 h ago to a minute ahead (a clock that went back).
            const capAt = now - next(30 * H) + (next(4) === 0 ? next(60_000) : 0);
            const amount = 1 + next(5_000_000);
            await store.writes.run(async (tx) => tx.payments.insert({
              id, orgId: ORG, agentId: agent, type: 'eip3009', status: 'signed', chainId: 8453, recipient: '0x0', amountMicros: BigInt(amount), reason: '',
              serviceSlug: '', resourceUrl: '', idempotencyKey: null, requestHash: 'h', request: '{}', result: '{}', approvalId: null, createdAt: capAt,
            }));
            exits.push(capAt + W);
          } else if (op === 3) {
            // A payment held for approval, its deadline from an hour ago to two hours ahead.
            const approvalId = `apr_${seed}_${n}`;
            const expiresAt = now - H + next(3 * H);
            await store.writes.run(async (tx) => {
              await tx.payments.insert({
                id, orgId: ORG, agentId: agent, type: 'eip3009', status: 'pending_approval', chainId: 8453, recipient: '0x0', amountMicros: BigInt(1 + next(900_000)),
                reason: 'held', serviceSlug: '', resourceUrl: '', idempotencyKey: null, requestHash: 'h', request: '{}', result: null, approvalId, createdAt: now,
              });
              await tx.approvals.insert({ id: approvalId, orgId: ORG, agentId: agent, transactionId: id, status: 'pending', createdAt: now, expiresAt, decidedAt: null, decidedBy: '', note: '' });
            });
            pending.push(id);
            deadlines.push(expiresAt);
            exits.push(now + W);
          } else if (op === 4 && pending.length > 0) {
            // A human denies one: the row stops holding the cap (a plain autocommit write, outside the queue).
            const txId = pending.splice(next(pending.length), 1)[0]!;
            writeTxn(store.db, () => {
              store.db.prepare("UPDATE approvals SET status = 'denied', decided_at = ? WHERE transaction_id = ? AND status = 'pending'").run(now, txId);
              store.db.prepare("UPDATE transactions SET status = 'denied', holds_cap = 0, updated_at = ? WHERE id = ? AND status = 'pending_approval'").run(now, txId);
            });
          } else if (op === 5) {
            // The horizon moves (rows copied into cap_rows), as the mover does a few seconds behind the clock.
            writeTxn(store.db, () => mover.advance(now - next(5_000)));
          } else if (op === 6 && exits.length > 0) {
            // To the very millisecond a row leaves the window, or the one before.
            now = exits[next(exits.length)]! - next(2);
          } else if (op === 7 && deadlines.length > 0) {
            now = deadlines[next(deadlines.length)]! - next(2);
          } else if (op === 8) {
            now += next(4) === 0 ? next(3 * H) : next(2_000);
          } else if (op === 9) {
            now -= next(2 * H);
          } else if (op === 10) {
            // Read while the writer holds an uncommitted payment: the read sees the committed state,
            // and what it read then must not be reused once that payment commits.
            const capAt = now - next(H);
            store.db.exec('BEGIN IMMEDIATE');
            store.db.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
              VALUES (?, ?, ?, 'eip3009', 'signed', ?, 1, ?, ?, ?)`).run(id, ORG, agent, 1 + next(1_000), capAt, capAt, capAt);
            for (const a of AGENTS) expect(await store.app.payments.committedSince(a, now - W, now), `seed ${seed} step ${step} in tx`).toBe(expected(plain, a, now));
            store.db.exec('COMMIT');
            exits.push(capAt + W);
          } else {
            now += next(60_000);
          }
          for (const a of AGENTS) {
            const want = expected(plain, a, now);
            // Twice: the second is the remembered one whenever the first could be remembered.
            expect(await store.app.payments.committedSince(a, now - W, now), `seed ${seed} step ${step} op ${op}`).toBe(want);
            expect(await store.app.payments.committedSince(a, now - W, now), `seed ${seed} step ${step} op ${op} again`).toBe(want);
          }
        }
      } finally {
        plain.close();
        await store.close();
      }
    }
  });

  test('behavior: the memo is used (a change it cannot see is not read again) and forgotten at the next write of this process', async () => {
    const now = 1_800_000_000_000;
    const file = tempFile();
    const { store, plain } = setup(file, now);
    try {
      const agent = AGENTS[0]!;
      expect(await store.app.payments.committedSince(agent, now - W, now)).toBe(0n);
      // Another connection writing is what the data directory's lock rules out while the service
      // runs; here it shows that the second read was answered from memory.
      const other = new Database(file);
      other.prepare(`INSERT INTO transactions (id, org_id, agent_id, type, status, amount_micros, holds_cap, cap_at, created_at, updated_at)
        VALUES ('tx_other', ?, ?, 'eip3009', 'signed', 700, 1, ?, ?, ?)`).run(ORG, agent, now - 1, now - 1, now - 1);
      other.close();
      expect(expected(plain, agent, now)).toBe(700n);
      expect(await store.app.payments.committedSince(agent, now - W, now)).toBe(0n);
      // A write, which is where payments are decided, never answers from the memo: it sees the row.
      expect(await store.writes.run(async (tx) => tx.payments.committedSince(agent, now - W, now))).toBe(700n);
      // Any row this process changes (here an unrelated agent's) names a new state: read again.
      await store.writes.run(async () => store.db.prepare("UPDATE agents SET name = 'renamed' WHERE id = ?").run(AGENTS[1]));
      expect(await store.app.payments.committedSince(agent, now - W, now)).toBe(700n);
      // The remembered sum does not outlive the row it counts: it leaves at cap_at + 24 h exactly.
      const exit = now - 1 + W;
      expect(await store.app.payments.committedSince(agent, exit - 1 - W, exit - 1)).toBe(700n);
      expect(await store.app.payments.committedSince(agent, exit - W, exit)).toBe(0n);
      // And a clock that goes back before the read it remembers reads again: the row is back in.
      expect(await store.app.payments.committedSince(agent, exit - 1 - W, exit - 1)).toBe(700n);
    } finally {
      plain.close();
      await store.close();
    }
  });
});
