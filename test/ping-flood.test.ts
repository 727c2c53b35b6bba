import { timestampMs } from '@bufbuild/protobuf/wkt';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TransactionStatus } from '../gen/paypolicy/v1/admin_pb.js';
import { PING_RECORD_INTERVAL_MS } from '../src/app/organizations/ping.js';
import { adminFor, createAgent, type Admin } from './helpers/admin.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

/**
 * An agent that pings as a health check must not flood the ledger: the real server, its clock
 * injected, takes 1,000 pings and keeps at most one zero-amount `recorded` row per agent per
 * PING_RECORD_INTERVAL_MS, while last_ping_at follows the pings to the second.
 */

const T0 = Date.parse('2031-03-01T00:00:00Z');
let clock = T0;
let s: TestServer;
let admin: Admin;

beforeAll(async () => {
  s = await startTestServer({ now: () => clock, logLevel: 'warn' });
  admin = adminFor(s);
});
afterAll(async () => s?.close());

const ping = (agentId: string) =>
  rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agentId }, headers: { connection: 'close' } });

/** Sends `count` pings, `parallel` at a time, each after `step()` moved the clock. */
async function pingMany(agentId: string, count: number, step: (i: number) => void, parallel = 1) {
  for (let i = 0; i < count; i += parallel) {
    step(i);
    const answers = await Promise.all(Array.from({ length: Math.min(parallel, count - i) }, () => ping(agentId)));
    for (const r of answers) expect(r.status).toBe(200);
  }
}

async function pingRows(agentId: string) {
  const r = await admin.client.listTransactions({ orgId: s.bootstrap.org_id, agentId, pageSize: 500 }, admin.auth);
  return r.transactions.map((t) => ({ at: timestampMs(t.createdAt!), type: t.type, status: t.status, amount: t.amountUsd }));
}

async function lastPingAt(agentId: string): Promise<number | undefined> {
  const a = (await admin.client.getAgent({ agentId }, admin.auth)).agent!;
  return a.lastPingAt ? timestampMs(a.lastPingAt) : undefined;
}

describe('ping flood', { timeout: 120_000 }, () => {
  test('behavior: 1,000 pings inside one interval leave one recorded row; last_ping_at is the last ping', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'health-checker');
    // Ten at a time, ten at each clock reading 5 s apart: the 1,000 pings span 495 s, less than one interval.
    await pingMany(agentId, 1000, (i) => { clock = T0 + (i / 10) * 5000; }, 10);
    expect(await pingRows(agentId)).toEqual([{ at: T0, type: 'ping', status: TransactionStatus.RECORDED, amount: '0' }]);
    expect(await lastPingAt(agentId)).toBe(T0 + 495_000);
  });

  test('behavior: 1,000 pings a second apart (16 min 40 s) leave one row per interval, and last_ping_at follows each ping', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'steady-pinger');
    const start = T0 + 3_600_000;
    await pingMany(agentId, 1000, (i) => { clock = start + i * 1000; });
    const rows = await pingRows(agentId);
    // Rows at 0 s and 600 s: the first ping, then the first one a whole interval after it.
    expect(rows.map((r) => r.at)).toEqual([start + PING_RECORD_INTERVAL_MS, start]);
    expect(rows.every((r) => r.type === 'ping' && r.status === TransactionStatus.RECORDED && r.amount === '0')).toBe(true);
    expect(await lastPingAt(agentId)).toBe(start + 999_000);
  });

  test('behavior: the interval is per agent: another agent\'s ping is recorded at once', async () => {
    const a = await createAgent(admin, s.bootstrap.org_id, 'first');
    const b = await createAgent(admin, s.bootstrap.org_id, 'second');
    clock = T0 + 7_200_000;
    await pingMany(a, 5, () => {});
    await pingMany(b, 5, () => {});
    expect((await pingRows(a)).length).toBe(1);
    expect((await pingRows(b)).length).toBe(1);
    expect([await lastPingAt(a), await lastPingAt(b)]).toEqual([clock, clock]);
  });

  test('behavior: last_ping_at moves at most once a second: pings within a second of it leave it, the first one a second later moves it', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'rapid-pinger');
    const start = T0 + 10_800_000;
    clock = start;
    await pingMany(agentId, 1, () => {});
    for (const dt of [1, 250, 999]) {
      clock = start + dt;
      await pingMany(agentId, 1, () => {});
      expect(await lastPingAt(agentId)).toBe(start);
    }
    clock = start + 1_000;
    await pingMany(agentId, 1, () => {});
    expect(await lastPingAt(agentId)).toBe(start + 1_000);
    // A clock that went back (a correction) moves it at once: never left ahead of the clock.
    clock = start + 500;
    await pingMany(agentId, 1, () => {});
    expect(await lastPingAt(agentId)).toBe(start + 500);
  });
});
