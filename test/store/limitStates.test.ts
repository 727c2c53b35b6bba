import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { PaymentRow, StoreTables, WindowSpec } from '../../src/store/port.js';
import { createPgStore } from '../../src/store/pg/store.js';
import { openStore } from '../../src/store/store.js';
import { createUnitOfWork } from '../../src/store/unitOfWork.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pgDatabase.js';

/**
 * The window limits' running sums (migration 0019) against the definition: after any sequence of
 * payments, approvals, moves of the clock (backwards too, as another replica's may be) and
 * measurements in writes and in reads, every window measures exactly what a sum over the rows it
 * covers gives. Run on both stores.
 */

const MIN = 60_000;
const ORG = 'org_ls';
const AGENTS = ['agt_ls1', 'agt_ls2'];
const SHOPS = ['0x' + '11'.repeat(20), '0x' + '22'.repeat(20)];
const WINDOWS: WindowSpec[] = [];
for (const agentId of [null, AGENTS[0]!]) for (const recipient of [null, SHOPS[0]!]) for (const w of [MIN, 10 * MIN, 60 * MIN]) WINDOWS.push({ agentId, recipient, since: w });

type Row = { id: string; agent: string; to: string; micros: bigint; fee: bigint; holds: boolean; capAt: number; pendingUntil: number | null };
type Op =
  | { kind: 'pay'; agent: number; to: number; micros: bigint; fee: bigint; pending: number | null }
  | { kind: 'decide'; pick: number; approve: boolean }
  | { kind: 'clock'; ms: number }
  | { kind: 'measure'; write: boolean; exclude: number | null };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('pay' as const), agent: fc.nat(1), to: fc.nat(1),
    micros: fc.oneof(fc.bigInt(1n, 5_000_000n), fc.constant(1_000_000_000_000_000n)), fee: fc.bigInt(0n, 3_000_000_000n),
    pending: fc.option(fc.integer({ min: 1, max: 30 * MIN })),
  }),
  fc.record({ kind: fc.constant('decide' as const), pick: fc.nat(), approve: fc.boolean() }),
  fc.record({ kind: fc.constant('clock' as const), ms: fc.integer({ min: -2 * MIN, max: 40 * MIN }) }),
  fc.record({ kind: fc.constant('measure' as const), write: fc.boolean(), exclude: fc.option(fc.nat()) }),
);

function expected(rows: readonly Row[], w: WindowSpec, now: number, excludeId: string | null) {
  const width = w.since;
  let micros = 0n;
  let count = 0;
  let fee = 0n;
  for (const r of rows) {
    if (!r.holds || r.capAt <= now - width || r.id === excludeId) continue;
    if (r.pendingUntil !== null && r.pendingUntil <= now) continue;
    if (w.agentId !== null && r.agent !== w.agentId) continue;
    if (w.recipient !== null && r.to !== w.recipient) continue;
    micros += r.micros;
    count++;
    fee += r.fee;
  }
  return { micros, count, feeGwei: fee };
}

type Harness = { write: <T>(fn: (t: StoreTables) => Promise<T>) => Promise<T>; read: <T>(fn: (t: StoreTables) => Promise<T>) => Promise<T>; close: () => Promise<void> };

let ids = 0;
const uuid = (tag: string) => `00000000-0000-4000-${tag}-${String(++ids).padStart(12, '0')}`;

async function run(h: Harness, ops: readonly Op[], start: number): Promise<void> {
  const rows: Row[] = [];
  let now = start;
  for (const o of ops) {
    if (o.kind === 'clock') {
      now += o.ms;
    } else if (o.kind === 'pay') {
      const id = uuid('8000');
      const row: Row = { id, agent: AGENTS[o.agent]!, to: SHOPS[o.to]!, micros: o.micros, fee: o.fee, holds: true, capAt: now, pendingUntil: o.pending === null ? null : now + o.pending };
      await h.write(async (t) => {
        const approvalId = row.pendingUntil === null ? null : uuid('9000');
        const payment: PaymentRow & { status: 'signed' | 'pending_approval' } = {
          id, orgId: ORG, agentId: row.agent, type: 'eip3009', status: approvalId ? 'pending_approval' : 'signed', chainId: 8453, recipient: row.to,
          amountMicros: row.micros, reason: '', serviceSlug: '', resourceUrl: '', idempotencyKey: null, requestHash: `h${id}`, request: '{}',
          result: approvalId ? null : '{}', approvalId, createdAt: now, feeGwei: row.fee,
        };
        await t.payments.insert(payment);
        if (approvalId) {
          await t.approvals.insert({ id: approvalId, orgId: ORG, agentId: row.agent, transactionId: id, status: 'pending', createdAt: now, expiresAt: row.pendingUntil!, decidedAt: null, decidedBy: '', note: '' });
        }
      });
      rows.push(row);
    } else if (o.kind === 'decide') {
      const open = rows.filter((r) => r.holds && r.pendingUntil !== null && r.pendingUntil > now);
      const r = open[o.pick % Math.max(open.length, 1)];
      if (!r) continue;
      await h.write(async (t) => {
        if (o.approve) {
          expect(await t.payments.markApproved(r.id, now)).toBe(true);
        } else {
          expect(await t.payments.releasePending(r.id, 'denied', 'no', now)).toBe(true);
        }
      });
      if (o.approve) Object.assign(r, { capAt: now, pendingUntil: null });
      else r.holds = false;
    } else {
      const excludeId = o.exclude === null || rows.length === 0 ? null : rows[o.exclude % rows.length]!.id;
      const q = { orgId: ORG, now, excludeId, windows: WINDOWS.map((w) => ({ ...w, since: now - w.since })) };
      const got = await (o.write ? h.write : h.read)((t) => t.payments.windowUses(q));
      expect(got).toEqual(WINDOWS.map((w) => expected(rows, w, now, excludeId)));
    }
  }
}

async function seed(t: StoreTables): Promise<void> {
  await t.organizations.insert({ id: ORG, name: 'ls', approvalWindowSeconds: 3600, createdAt: 1 });
  for (const id of AGENTS) {
    await t.agents.insert({
      id, orgId: ORG, name: id, status: 'active', createdAt: 1, updatedAt: 1, lastPingAt: null,
      policy: { allowlist: [], spendCapMicros: 0n, approvalThresholdMicros: 0n, maxNetworkFeeWei: 0n, maxPerPaymentMicros: null, limits: [], updatedAt: 1 },
    });
  }
}

describe.each(['sqlite', 'postgres'] as const)('window limits\' running sums on %s', (kind) => {
  let h: Harness;
  let dir: string | undefined;
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    if (kind === 'sqlite') {
      dir = mkdtempSync(join(tmpdir(), 'paypolicy-limit-states-'));
      const store = openStore(join(dir, 'paypolicy.db'));
      const uow = createUnitOfWork(store);
      h = { write: (fn) => uow.write(fn), read: (fn) => uow.read(fn), close: async () => store.close() };
    } else {
      db = await createTestDatabase();
      const store = await createPgStore({ connectionString: db.url, poolSize: 2 });
      h = { write: (fn) => store.uow.write(fn), read: (fn) => store.uow.read(fn), close: () => store.close() };
    }
    await h.write(seed);
  });
  afterAll(async () => {
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    await db?.drop();
  });

  test('property: every window measures exactly the rows it covers, whatever happened since it was last measured', async () => {
    let start = 10_000_000;
    await fc.assert(fc.asyncProperty(fc.array(op, { minLength: 5, maxLength: 60 }), async (ops) => {
      // Each run on a later stretch of time, so earlier runs' rows are far outside every window.
      start += 1_000 * 60 * MIN;
      await run(h, [...ops, { kind: 'measure', write: true, exclude: null }, { kind: 'clock', ms: 11 * MIN }, { kind: 'measure', write: false, exclude: null }], start);
    }), { numRuns: kind === 'sqlite' ? 60 : 25 });
  });
});
