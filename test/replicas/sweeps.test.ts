import { afterAll, beforeAll, expect, test } from 'vitest';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * Sweeps run once per cluster, not once per replica: three replicas, each with a sweep
 * timer of 1 s (--stale-signing-ms 2000 makes the period half of it), start the approval sweep
 * about once a second between them, not three times.
 */

let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ replicas: 3, args: ['--stale-signing-ms', '2000'], env: { PAYPOLICY_LOG_LEVEL: 'debug' } });
}, 120_000);
afterAll(async () => c?.close(), 60_000);

test('the approval sweep starts about once per period across three replicas', async () => {
  const runs = () => c.replicas.reduce((n, r) => n + r.logLines('cluster job ran').filter((l) => l.job === 'approval-sweep').length, 0);
  const before = runs();
  await new Promise((r) => setTimeout(r, 6_000));
  const during = runs() - before;
  // Each replica's timer fires about 6 times: 15-18 sweeps if every replica swept (measured with
  // once() instead of oncePer(): 15), ~6-7 once per period.
  expect(during).toBeGreaterThanOrEqual(3);
  expect(during).toBeLessThanOrEqual(9);
}, 60_000);
