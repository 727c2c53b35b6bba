import { afterAll, beforeAll, expect, test } from 'vitest';
import pg from 'pg';
import { AgentStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { createAgent, createKey } from '../helpers/admin.js';
import { postSign, setPolicy, type SignBody } from '../helpers/payments.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * A policy change made on replica A while B and C are mid-burst binds every
 * payment recorded after the change's commit was acknowledged. A request authenticated before a
 * revoke (or that read the agent before a pause) may still be waiting for the signing stage or
 * its turn in the write queue when the change commits: what it then records must be judged by
 * the ledger as it is at its own write, not by what the request saw when it came in.
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';

let c: Cluster;
let db: pg.Client;

beforeAll(async () => {
  c = await startCluster({
    replicas: 3,
    // A long signing queue: a burst waits (up to 30 s) rather than being shed, as it would under real load.
    args: ['--max-in-flight', '1000', '--max-sign-queue', '1000', '--max-queue-ms', '30000'],
  });
  db = new pg.Client({ connectionString: c.db.url });
  await db.connect();
}, 120_000);
afterAll(async () => {
  await db?.end().catch(() => {});
  await c?.close();
}, 60_000);

const eip3009 = (agentId: string, amountUsd: string): SignBody => ({ agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amountUsd });

async function freshAgent(name: string): Promise<string> {
  const agentId = await createAgent(c.admin(0), c.bootstrap.org_id, name);
  await setPolicy(c.admin(0), agentId, { allowlist: [RECIPIENT], capUsd: '100000', thresholdUsd: '50000' });
  return agentId;
}

/** Fires `n` payments at replicas 1 and 2, waits until `started` of them are signed, runs `change` on replica 0. */
async function burstThenChange(agentId: string, key: string, change: () => Promise<void>): Promise<{ ackedAt: number; after: Array<{ status: string; created_at: string }> }> {
  const burst = Promise.all(Array.from({ length: 400 }, (_, i) => postSign(c.replicas[1 + (i % 2)]!.url, key, eip3009(agentId, '0.01'))));
  for (;;) {
    const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM transactions WHERE agent_id = $1`, [agentId]);
    if (Number(rows[0]!.n) >= 20) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  await change();
  // The change's acknowledgement, in the database's clock terms (created_at is the replicas' ms clock; same machine).
  const ackedAt = Date.now();
  await burst;
  const { rows } = await db.query<{ status: string; created_at: string }>(
    `SELECT status, created_at::text FROM transactions WHERE agent_id = $1 AND status = 'signed' AND created_at > $2 ORDER BY created_at`, [agentId, ackedAt]);
  return { ackedAt, after: rows };
}

test('a key revoked on replica A mid-burst: nothing is signed with it after the revoke is acknowledged', async () => {
  const agentId = await freshAgent('revoke');
  const key = await createKey(c.admin(0), c.bootstrap.org_id, 'test', 'burst');
  const { after } = await burstThenChange(agentId, key.plaintext, async () => {
    await c.admin(0).client.revokeApiKey({ id: key.id }, c.admin(0).auth);
  });
  expect(after.length, JSON.stringify(after.slice(0, 3))).toBe(0);
}, 120_000);

test('an agent paused on replica A mid-burst: nothing is signed for it after the pause is acknowledged', async () => {
  const agentId = await freshAgent('pause');
  const key = await createKey(c.admin(0), c.bootstrap.org_id, 'test', 'burst-pause');
  const { after } = await burstThenChange(agentId, key.plaintext, async () => {
    await c.admin(0).client.updateAgent({ agentId, status: AgentStatus.PAUSED }, c.admin(0).auth);
  });
  expect(after.length, JSON.stringify(after.slice(0, 3))).toBe(0);
}, 120_000);

test('a cap lowered on replica A mid-burst: nothing is signed beyond it after the change is acknowledged', async () => {
  const agentId = await freshAgent('cap');
  const key = await createKey(c.admin(0), c.bootstrap.org_id, 'test', 'burst-cap');
  const { after } = await burstThenChange(agentId, key.plaintext, async () => {
    await setPolicy(c.admin(0), agentId, { allowlist: [RECIPIENT], capUsd: '0.01', thresholdUsd: '50000' });
  });
  expect(after.length, JSON.stringify(after.slice(0, 3))).toBe(0);
}, 120_000);
