import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, expect, test } from 'vitest';
import pg from 'pg';
import { createAgent } from '../helpers/admin.js';
import { listAllTransactions, postSign, setPolicy, type SignBody } from '../helpers/payments.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * The same Idempotency-Key with different bodies on two replicas at once, and a statement that
 * hangs behind another session's lock.
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';
let c: Cluster;
let db: pg.Client;

beforeAll(async () => {
  c = await startCluster({ replicas: 3, args: ['--max-in-flight', '1000', '--max-sign-queue', '1000', '--max-queue-ms', '30000', '--database-statement-timeout-ms', '1500'] });
  db = new pg.Client({ connectionString: c.db.url });
  await db.connect();
}, 120_000);
afterAll(async () => {
  await db?.end().catch(() => {});
  await c?.close();
}, 60_000);

const eip3009 = (agentId: string, amountUsd: string): SignBody => ({ agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amountUsd });

test('one Idempotency-Key, different bodies, two replicas at once: one payment, the other 409 idempotency_key_reused', async () => {
  const agentId = await createAgent(c.admin(0), c.bootstrap.org_id, 'bodies');
  await setPolicy(c.admin(0), agentId, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '500' });
  for (let k = 0; k < 40; k++) {
    const key = `k-${k}`;
    const answers = await Promise.all([
      postSign(c.replicas[k % 3]!.url, c.bootstrap.api_key, eip3009(agentId, '0.10'), key),
      postSign(c.replicas[(k + 1) % 3]!.url, c.bootstrap.api_key, eip3009(agentId, '0.20'), key),
    ]);
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses, answers.map((a) => a.text).join('\n')).toEqual([200, 409]);
    const loser = answers.find((a) => a.status === 409)!;
    expect(loser.json.code, loser.text).toBe('idempotency_key_reused');
  }
  const rows = await listAllTransactions(c.admin(2), c.bootstrap.org_id, agentId);
  expect(rows).toHaveLength(40);
}, 120_000);

test('a table locked by another session: requests fail fast with 503, /readyz answers, and all recover once released', async () => {
  const agentId = await createAgent(c.admin(0), c.bootstrap.org_id, 'locked');
  await setPolicy(c.admin(0), agentId, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '500' });
  expect((await postSign(c.replicas[0]!.url, c.bootstrap.api_key, eip3009(agentId, '0.01'))).status).toBe(200);
  const psql: ChildProcess = spawn('psql', [c.db.url, '-v', 'ON_ERROR_STOP=1'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  psql.stdout!.on('data', (d) => (out += d));
  psql.stdin!.write('BEGIN; LOCK TABLE transactions IN ACCESS EXCLUSIVE MODE; SELECT \'locked\';\n');
  for (let i = 0; !out.includes('locked'); i++) {
    if (i > 200) throw new Error('psql did not take the lock');
    await new Promise((r) => setTimeout(r, 25));
  }
  try {
    const t0 = Date.now();
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) =>
      postSign(c.replicas[i % 3]!.url, c.bootstrap.api_key, eip3009(agentId, '0.01'), `lock-${i}`).then((r) => ({ r, ms: Date.now() - t0 }))));
    const slow = Math.max(...answers.map((a) => a.ms));
    expect(answers.map((a) => a.r.status).filter((s) => s !== 503), answers.map((a) => a.r.text).slice(0, 2).join('\n')).toEqual([]);
    // Each statement is bounded by the 1.5 s timeout; a request runs a few of them.
    expect(slow).toBeLessThan(10_000);
    for (const r of c.replicas) {
      const ready = await fetch(`${r.url}/readyz`);
      expect(ready.status).toBe(200);
    }
  } finally {
    psql.stdin!.end('ROLLBACK;\n');
  }
  const after = await Promise.all(Array.from({ length: 30 }, (_, i) => postSign(c.replicas[i % 3]!.url, c.bootstrap.api_key, eip3009(agentId, '0.01'), `lock-${i}`)));
  expect(after.map((a) => a.status), after.map((a) => a.text).slice(0, 2).join('\n')).toEqual(Array(30).fill(200));
  const rows = await listAllTransactions(c.admin(2), c.bootstrap.org_id, agentId);
  expect(rows).toHaveLength(31);
}, 120_000);
