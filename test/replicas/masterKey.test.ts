import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * The master key on PostgreSQL (README "PostgreSQL and replicas"): never generated, and a replica
 * given another key than the cluster's refuses to start instead of sealing treasuries the other
 * replicas could not open.
 */

let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ replicas: 1 });
}, 60_000);
afterAll(async () => c?.close(), 60_000);

test('a replica with another master key, or none, refuses to start; the same key joins', async () => {
  await expect(c.start(1, { env: { PAYPOLICY_MASTER_KEY: randomBytes(32).toString('hex') } }))
    .rejects.toThrow(/not the one the other replicas of this database use/);
  await expect(c.start(2, { env: { PAYPOLICY_MASTER_KEY: '' } }))
    .rejects.toThrow(/master key must be given/);
  const joined = await c.start(3);
  const r = await fetch(`${joined.url}/readyz`);
  expect(r.status).toBe(200);
}, 60_000);
