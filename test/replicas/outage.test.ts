import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * A database outage seen from a running replica: /readyz turns 503 when
 * PostgreSQL stops answering, requests fail fast with 503 instead of hanging, and the replica
 * recovers by itself when the database is back. The database is reached through a TCP relay the
 * test can cut.
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';
let relay: Server;
let up = true;
const sockets = new Set<Socket>();
let c: Cluster;

beforeAll(async () => {
  relay = createServer((client) => {
    if (!up) {
      client.destroy();
      return;
    }
    const server = connect(5432, '127.0.0.1');
    for (const s of [client, server]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(server).pipe(client);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', () => r()));
  const port = (relay.address() as AddressInfo).port;
  c = await startCluster({
    replicas: 1,
    databaseUrl: (url) => url.replace('127.0.0.1:5432', `127.0.0.1:${port}`),
    args: ['--database-statement-timeout-ms', '1000'],
  });
  await setPolicy(c.admin(0), c.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '50' });
}, 60_000);
afterAll(async () => {
  up = true;
  await c?.close();
  relay?.close();
}, 60_000);

const pay = () => postSign(c.replicas[0]!.url, c.bootstrap.api_key, {
  agent_id: c.bootstrap.agent_id, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.01',
});
const readyz = async () => (await fetch(`${c.replicas[0]!.url}/readyz`, { headers: { connection: 'close' } })).status;

async function within(ms: number, check: () => Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  while (!(await check())) {
    if (Date.now() - t0 > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return Date.now() - t0;
}

test('/readyz fails while PostgreSQL is unreachable, requests fail fast with 503, and the replica recovers by itself', async () => {
  expect((await pay()).status).toBe(200);
  expect(await readyz()).toBe(200);

  // The database goes away: every connection cut, new ones refused.
  up = false;
  for (const s of sockets) s.destroy();
  await within(8_000, async () => (await readyz()) === 503);
  const t0 = Date.now();
  const r = await pay();
  expect(Date.now() - t0).toBeLessThan(4_000);
  expect(r.status, r.text).toBe(503);
  expect(r.json.code).toMatch(/^database_(unavailable|busy)$/);

  // Back: ready again and paying, without a restart.
  up = true;
  await within(10_000, async () => (await readyz()) === 200);
  await within(10_000, async () => (await pay()).status === 200);
}, 60_000);
