import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { PaymentRow } from '../../../src/store/port.js';
import { createPgStore, type PgStore } from '../../../src/store/pg/store.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

/**
 * Three stores, each with its own pool, stand in for three paypolicy replicas sharing one
 * PostgreSQL. Every write goes through `write()` (SERIALIZABLE, retried on serialization
 * failures), exactly as the use cases' unit of work does.
 */
let d: TestDatabase;
let replicas: PgStore[];
const ORG = 'org_race';
const AGENT = 'agt_race';
const CHAIN = 8453;

beforeAll(async () => {
  d = await createTestDatabase();
  // 1,000 writes queue for 24 connections: the wait for a free one is bounded by connectTimeoutMs
  // (2 s by default; a server bounds the queue itself, --max-queue-ms), so it is long here. So is
  // the statement timeout (5 s by default): the nonce race queues every writer on one counter row,
  // and on a machine busy with other files that queue can outlast it. What a timeout answers is
  // tested on its own (clusterTimeout.test.ts); here it is the race.
  replicas = await Promise.all([0, 1, 2].map(() => createPgStore({ connectionString: d.url, poolSize: 8, connectTimeoutMs: 30_000, statementTimeoutMs: 30_000 })));
  const [first] = replicas;
  await first!.uow.write(async (tx) => {
    await tx.organizations.insert({ id: ORG, name: 'race', approvalWindowSeconds: 3600, createdAt: 1 });
    await tx.agents.insert({
      id: AGENT, orgId: ORG, name: 'racer', status: 'active', createdAt: 1, updatedAt: 1, lastPingAt: null,
      policy: { allowlist: [], spendCapMicros: 500_000n, approvalThresholdMicros: 0n, maxNetworkFeeWei: 10n ** 15n, maxPerPaymentMicros: null, limits: [], updatedAt: 1 },
    });
  });
}, 60_000);
afterAll(async () => {
  await Promise.all((replicas ?? []).map((r) => r.close()));
  await d?.drop();
});

let seq = 0;
function row(status: 'signed' | 'signing', amountMicros: bigint, type = 'eip3009'): PaymentRow & { status: 'signed' | 'signing' } {
  seq++;
  return {
    id: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`, orgId: ORG, agentId: AGENT, type, status,
    chainId: CHAIN, recipient: '0x' + '11'.repeat(20), amountMicros, reason: '', serviceSlug: '', resourceUrl: '',
    idempotencyKey: null, requestHash: 'h', request: '{}', result: null, approvalId: null, createdAt: Date.now(),
  };
}

async function scalar<T>(text: string, values: unknown[] = []): Promise<T> {
  const c = new pg.Client(d.url);
  await c.connect();
  try {
    return Object.values((await c.query(text, values)).rows[0] as object)[0] as T;
  } finally {
    await c.end();
  }
}

describe('write() across three replicas', () => {
  test('behavior: 1,000 cap-checking payments raced over three pools never exceed the cap, and every one is answered and kept', async () => {
    const cap = 500_000n;
    const amount = 1_000n;
    let runs = 0;
    const outcomes = await Promise.allSettled(Array.from({ length: 1000 }, (_, i) => replicas[i % 3]!.uow.write(async (tx) => {
      runs++;
      const now = Date.now();
      const spent = await tx.payments.committedSince(AGENT, now - 86_400_000, now);
      if (spent + amount > cap) return { inserted: false as const, spent };
      const r = row('signed', amount);
      await tx.payments.insert(r);
      return { inserted: true as const, id: r.id, spent };
    })));
    const failed = outcomes.filter((o) => o.status === 'rejected');
    expect(failed.map((f) => String((f as PromiseRejectedResult).reason))).toEqual([]);
    const results = outcomes.map((o) => (o as PromiseFulfilledResult<{ inserted: boolean; id?: string; spent: bigint }>).value);
    const inserted = results.filter((r) => r.inserted);
    // Exactly the cap: serialized, the first 500 fit and every later one saw them all.
    expect(inserted.length).toBe(500);
    expect(results.every((r) => r.spent <= cap)).toBe(true);
    // Nothing lost, nothing extra: every acknowledged insert is in the ledger, and only those.
    const ids = await scalar<string[]>(`SELECT array_agg(id ORDER BY id) FROM transactions WHERE agent_id = $1`, [AGENT]);
    expect(ids).toEqual(inserted.map((r) => r.id!).sort());
    expect(BigInt(await scalar<string>('SELECT SUM(amount_micros)::text FROM transactions WHERE agent_id = $1', [AGENT]))).toBe(cap);
    // The race was real: serialization failures happened and were retried.
    expect(runs).toBeGreaterThan(1000);
    console.log(`cap race: 1000 writes, ${runs} runs of fn (${runs - 1000} retries)`);
  }, 120_000);

  test('behavior: allocateNonce raced over three pools: every nonce held once, signed and handed-back nonces exactly cover the counter, no gap', async () => {
    let runs = 0;
    const outcomes = await Promise.allSettled(Array.from({ length: 600 }, (_, i) => replicas[i % 3]!.uow.write(async (tx) => {
      runs++;
      const r = row('signing', 1n, 'raw_transaction');
      await tx.payments.insert(r);
      const nonce = await tx.payments.allocateNonce(ORG, CHAIN, r.id);
      // One in five fails to sign, in the same write: its nonce goes back for the next reservation.
      if (i % 5 === 0) expect(await tx.payments.markFailed(r.id, 'signing failed', Date.now())).toBe(true);
      else expect(await tx.payments.settleSigned(r.id, '{}', Date.now())).toBe(true);
      return { id: r.id, nonce, signed: i % 5 !== 0 };
    })));
    expect(outcomes.filter((o) => o.status === 'rejected').map((o) => String((o as PromiseRejectedResult).reason))).toEqual([]);
    const results = outcomes.map((o) => (o as PromiseFulfilledResult<{ id: string; nonce: number; signed: boolean }>).value);
    const signedNonces = results.filter((r) => r.signed).map((r) => r.nonce).sort((a, b) => a - b);
    expect(new Set(signedNonces).size).toBe(480);
    const counter = await replicas[0]!.payments.nonceCounter(ORG, CHAIN);
    const released = (await scalar<string[] | null>('SELECT array_agg(nonce::text ORDER BY nonce) FROM released_nonces WHERE org_id = $1 AND chain_id = $2', [ORG, CHAIN]) ?? []).map(Number);
    // Signed and released nonces are disjoint and together exactly 0 … counter-1.
    expect(released.filter((n) => signedNonces.includes(n))).toEqual([]);
    expect([...signedNonces, ...released].sort((a, b) => a - b)).toEqual(Array.from({ length: counter }, (_, n) => n));
    // Handed-back nonces were reused rather than skipped: at most one left over per racing writer.
    expect(released.length).toBeLessThanOrEqual(24);
    // What the database holds matches what each write was told.
    const held = await scalar<string[]>(`SELECT array_agg(nonce::text ORDER BY nonce) FROM transactions
      WHERE org_id = $1 AND chain_id = $2 AND type = 'raw_transaction' AND status = 'signed'`, [ORG, CHAIN]);
    expect(held.map(Number)).toEqual(signedNonces);
    console.log(`nonce race: 600 writes, ${runs} runs of fn, counter ${counter}, ${released.length} handed back and unused`);
  }, 120_000);
});
