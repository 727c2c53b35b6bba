import { createServer, connect, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DomainError } from '../../../src/domain/errors.js';
import type { PaymentRow } from '../../../src/store/port.js';
import { createPgStore, type PgStore } from '../../../src/store/pg/store.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

let d: TestDatabase;
let store: PgStore;
const ORG = 'org_uow';
const AGENT = 'agt_uow';

beforeAll(async () => {
  d = await createTestDatabase();
  store = await createPgStore({ connectionString: d.url, poolSize: 4 });
  await store.uow.write(async (tx) => {
    await tx.organizations.insert({ id: ORG, name: 'uow', approvalWindowSeconds: 3600, createdAt: 1 });
    await tx.agents.insert({
      id: AGENT, orgId: ORG, name: 'a', status: 'active', createdAt: 1, updatedAt: 1, lastPingAt: null,
      policy: { allowlist: [], spendCapMicros: 10n, approvalThresholdMicros: 0n, maxNetworkFeeWei: 1n, maxPerPaymentMicros: null, limits: [], updatedAt: 1 },
    });
  });
});
afterAll(async () => {
  await store?.close();
  await d?.drop();
});

let seq = 0;
function row(status: 'signed' | 'pending_approval' = 'signed'): PaymentRow & { status: 'signed' | 'pending_approval' } {
  seq++;
  return {
    id: `10000000-0000-4000-8000-${String(seq).padStart(12, '0')}`, orgId: ORG, agentId: AGENT, type: 'eip3009', status,
    chainId: 8453, recipient: '0x', amountMicros: 1n, reason: '', serviceSlug: '', resourceUrl: '',
    idempotencyKey: null, requestHash: 'h', request: '{}', result: null, approvalId: null, createdAt: 5,
  };
}

/** A TCP relay to the test server that the test can cut (an outage) or silence (a server that stops answering). */
async function relay(): Promise<{ url: string; cut(): void; silence(): void; restore(): void; close(): Promise<void> }> {
  const target = new URL(d.url);
  const sockets = new Set<Socket>();
  let mode: 'open' | 'cut' | 'silent' = 'open';
  const server: Server = createServer((client) => {
    if (mode === 'cut') return void client.destroy();
    const upstream = connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    client.on('data', (b) => { if (mode === 'open') upstream.write(b); });
    upstream.on('data', (b) => { if (mode === 'open') client.write(b); });
    const end = () => { client.destroy(); upstream.destroy(); };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = new URL(d.url);
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    cut() { mode = 'cut'; for (const s of sockets) s.destroy(); sockets.clear(); },
    silence() { mode = 'silent'; },
    restore() { mode = 'open'; },
    close: () => { for (const s of sockets) s.destroy(); return new Promise((r) => server.close(() => r())); },
  };
}

describe('write()', () => {
  test('behavior: when fn throws nothing is written and the promise rejects with fn\'s error', async () => {
    const r = row();
    const boom = new DomainError('conflict', 'refused by fn');
    await expect(store.uow.write(async (tx) => {
      await tx.payments.insert(r);
      throw boom;
    })).rejects.toBe(boom);
    expect(await store.payments.get(r.id)).toBeUndefined();
  });

  test('error: a statement error fn swallowed is not taken for a commit (PostgreSQL answers COMMIT with ROLLBACK)', async () => {
    const first = row();
    await store.uow.write((tx) => tx.payments.insert(first));
    const second = row();
    await expect(store.uow.write(async (tx) => {
      await tx.payments.insert(second);
      await tx.payments.insert(first).catch(() => {});
      return 'looks fine';
    })).rejects.toMatchObject({ code: '23505' });
    expect(await store.payments.get(second.id)).toBeUndefined();
  });

  test('behavior: the approval listener runs after the commit, once, and never for a run that rolled back', async () => {
    const calls: Array<[string, number]> = [];
    await store.approvals.onDecided((status, waited) => calls.push([status, waited]));
    const tx1 = row('pending_approval');
    await store.uow.write(async (tx) => {
      await tx.payments.insert(tx1);
      await tx.approvals.insert({ id: 'ap-1', orgId: ORG, agentId: AGENT, transactionId: tx1.id, status: 'pending', createdAt: 100,
        expiresAt: 10_000, decidedAt: null, decidedBy: '', note: '' });
    });
    await expect(store.uow.write(async (tx) => {
      expect(await tx.approvals.decide('ap-1', 'approved', 150, 'u', '')).toBe(true);
      throw new Error('rolled back');
    })).rejects.toThrow('rolled back');
    expect(calls).toEqual([]);
    let inside = -1;
    await store.uow.write(async (tx) => {
      expect(await tx.approvals.decide('ap-1', 'denied', 400, 'u', 'no')).toBe(true);
      inside = calls.length;
    });
    expect(inside).toBe(0);
    expect(calls).toEqual([['denied', 300]]);
    expect(await store.uow.write((tx) => tx.approvals.decide('ap-1', 'approved', 500, 'u', ''))).toBe(false);
    expect(calls).toHaveLength(1);
  });

  test('behavior: read() is one snapshot and refuses writes', async () => {
    await expect(store.uow.read((tx) => tx.settings.set('k', 'v'))).rejects.toThrow(/read-only transaction/);
    const seen = await store.uow.read(async (tx) => {
      const before = await tx.settings.get('snap');
      await store.settings.set('snap', 'written meanwhile');
      return [before, await tx.settings.get('snap')];
    });
    expect(seen).toEqual([undefined, undefined]);
    expect(await store.settings.get('snap')).toBe('written meanwhile');
  });

  test('error: database_busy after maxWriteAttempts runs that each lost a race; nothing written', async () => {
    const busy = await createPgStore({ connectionString: d.url, poolSize: 1, maxWriteAttempts: 3 });
    try {
      let runs = 0;
      const err = await busy.uow.write(async (tx) => {
        runs++;
        await tx.settings.get('x');
        throw Object.assign(new Error('could not serialize access'), { code: '40001' });
      }).catch((e: unknown) => e);
      expect(err).toMatchObject({ kind: 'overloaded', code: 'database_busy' });
      expect(runs).toBe(3);
    } finally {
      await busy.close();
    }
  });
});

describe('an unreachable or silent database', () => {
  test('error: database_unavailable at start when nothing listens, within the connect timeout', async () => {
    const t = Date.now();
    await expect(createPgStore({ connectionString: 'postgres://root@127.0.0.1:1/none', connectTimeoutMs: 1000 }))
      .rejects.toMatchObject({ kind: 'overloaded', code: 'database_unavailable' });
    expect(Date.now() - t).toBeLessThan(3000);
  });

  test('behavior: an outage fails writes and reads fast with database_unavailable; once the server is back the store recovers by itself', async () => {
    const link = await relay();
    const errors: Error[] = [];
    const s = await createPgStore({ connectionString: link.url, poolSize: 2, connectTimeoutMs: 1000, statementTimeoutMs: 1000, onError: (e) => errors.push(e) });
    try {
      await s.uow.write((tx) => tx.settings.set('outage', 'before'));
      link.cut();
      for (const attempt of [() => s.uow.write((tx) => tx.settings.set('outage', 'during')), () => s.settings.get('outage'), () => s.ping()]) {
        const t = Date.now();
        await expect(attempt()).rejects.toMatchObject({ code: 'database_unavailable' });
        expect(Date.now() - t).toBeLessThan(2500);
      }
      link.restore();
      await s.uow.write((tx) => tx.settings.set('outage', 'after'));
      expect(await s.settings.get('outage')).toBe('after');
      await s.ping();
    } finally {
      await s.close();
      await link.close();
    }
  });

  test('behavior: a server that stops answering mid-transaction fails the write within statement timeout + 1 s (never a hang)', async () => {
    const link = await relay();
    const s = await createPgStore({ connectionString: link.url, poolSize: 1, connectTimeoutMs: 1000, statementTimeoutMs: 500 });
    try {
      await s.settings.set('silent', 'x');
      const t = Date.now();
      await expect(s.uow.write(async (tx) => {
        await tx.settings.get('silent');
        link.silence();
        await tx.settings.set('silent', 'y');
      })).rejects.toMatchObject({ code: 'database_unavailable' });
      expect(Date.now() - t).toBeLessThan(3000);
      link.restore();
      expect(await s.settings.get('silent')).toBe('x');
    } finally {
      await s.close();
      await link.close();
    }
  });

  test('behavior: a statement held behind another session\'s lock is cut off at statement_timeout: 503, the row unchanged', async () => {
    const s = await createPgStore({ connectionString: d.url, poolSize: 1, statementTimeoutMs: 300 });
    const holder = new pg.Client(d.url);
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM agents WHERE id = $1 FOR UPDATE', [AGENT]);
      const t = Date.now();
      await expect(s.uow.write((tx) => tx.agents.update(AGENT, 'renamed', 'paused', 9))).rejects.toMatchObject({ code: 'database_unavailable' });
      expect(Date.now() - t).toBeLessThan(2000);
      await holder.query('ROLLBACK');
      expect((await s.agents.get(AGENT))!.status).toBe('active');
    } finally {
      await holder.end();
      await s.close();
    }
  });
});
