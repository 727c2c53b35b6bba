import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, expect, test } from 'vitest';
import type { BootstrapFile } from '../../src/bootstrap.js';
import { adminFor } from '../helpers/admin.js';
import { sqliteBuckets } from '../helpers/capBuckets.js';
import { spawnCli, type CliProcess } from '../helpers/cli.js';
import { postSign, setPolicy, usdToMicros, type SignBody } from '../helpers/payments.js';
import type { RestResult, TestServer } from '../helpers/server.js';

/**
 * Hostile conditions against the hourly cap sums (migration 0010): kill -9 of the real server (SQLite)
 * in the middle of a burst of one agent's payments of every direct type. The buckets are kept by
 * triggers in the same transaction as each write, so whatever the kill cut, the file must hold
 * buckets equal to the holding rows' per-hour sums; the restart's repairs (rows left `signing`
 * failed, their holds released) must keep them so; and after the restart exactly what is left
 * under the cap is allowed.
 */

const RECIPIENT = '0x90f79bf6eb2c4f870365e785982e1f101e93b906';
const HOUR = 3_600_000n;
const dirs: string[] = [];
const procs: CliProcess[] = [];
afterAll(async () => {
  for (const p of procs) {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await p.exited;
  }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function serve(dataDir: string): Promise<{ p: CliProcess; url: string }> {
  const p = spawnCli(['serve', '--port', '0', '--data-dir', dataDir], { PAYPOLICY_LOG_LEVEL: 'warn', PAYPOLICY_SIGNER_THREADS: '1' });
  procs.push(p);
  const listening = /(?:listening on |curl -s -X POST )(http:\/\/127\.0\.0\.1:\d+)/;
  const out = await p.waitForStdout(listening, 20_000);
  return { p, url: listening.exec(out)![1]! };
}

/** cap_buckets vs the holding rows' sums per agent-hour (computed here), and the agent's held sum. */
function ledger(file: string, agentId: string): { buckets: Record<string, string>; derived: Record<string, string>; held: bigint } {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    db.defaultSafeIntegers(true);
    const derived: Record<string, bigint> = {};
    let held = 0n;
    for (const r of db.prepare('SELECT agent_id, cap_at, amount_micros FROM transactions WHERE holds_cap = 1').all() as Array<{ agent_id: string; cap_at: bigint; amount_micros: bigint }>) {
      const h = r.cap_at >= 0n ? r.cap_at / HOUR : -((-r.cap_at + HOUR - 1n) / HOUR);
      derived[`${r.agent_id}|${h}`] = (derived[`${r.agent_id}|${h}`] ?? 0n) + r.amount_micros;
      if (r.agent_id === agentId) held += r.amount_micros;
    }
    const buckets: Record<string, string> = {};
    for (const b of sqliteBuckets(db, 'total != 0')) {
      buckets[`${b.agent_id}|${b.bucket}`] = String(b.total);
    }
    return { buckets, derived: Object.fromEntries(Object.entries(derived).filter(([, v]) => v !== 0n).map(([k, v]) => [k, String(v)])), held };
  } finally {
    db.close();
  }
}

test('kill -9 mid-burst: buckets equal the ledger in the file, after the restart repairs, and the cap is exact afterwards', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'paypolicy-capkill-'));
  dirs.push(dataDir);
  const file = join(dataDir, 'paypolicy.db');
  let { p, url } = await serve(dataDir);
  const bootstrap = JSON.parse(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')) as BootstrapFile;
  const agentId = bootstrap.agent_id;
  await setPolicy(adminFor({ url, bootstrap } as TestServer), agentId, { allowlist: [RECIPIENT], capUsd: '5', thresholdUsd: '1' });
  const kinds = ['eip3009', 'permit2', 'raw_transaction'] as const;
  const body = (i: number): SignBody => ({ agent_id: agentId, type: kinds[i % 3], chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.04', payload: {} });

  // A reader on the same file watches the burst and the kill comes once some rows are written.
  const reader = new Database(file, { readonly: true, fileMustExist: true });
  const rows = reader.prepare("SELECT COUNT(*) AS n FROM transactions WHERE agent_id = ? AND status = 'signed'");
  const answers: Array<Promise<RestResult | undefined>> = Array.from({ length: 200 }, (_, i) => postSign(url, bootstrap.api_key, body(i), `k-${i}`).catch(() => undefined));
  // Killed with some payments signed (and answered) and others reserved, signing or unread.
  while ((rows.get(agentId) as { n: number }).n < 20) await new Promise((r) => setImmediate(r));
  p.child.kill('SIGKILL');
  await p.exited;
  const acked = (await Promise.all(answers)).filter((r) => r?.status === 200).length;
  reader.close();

  const cut = ledger(file, agentId);
  expect(cut.buckets).toEqual(cut.derived);

  ({ p, url } = await serve(dataDir));
  const repaired = ledger(file, agentId);
  expect(repaired.buckets).toEqual(repaired.derived);
  expect(repaired.held <= usdToMicros('5')).toBe(true);
  // Every payment answered 200 before the kill still holds the cap (durable before it was sent).
  expect(repaired.held >= usdToMicros('0.04') * BigInt(acked)).toBe(true);

  const fits = Number((usdToMicros('5') - repaired.held) / usdToMicros('0.04'));
  // Sent 20 at a time, a 503 (shed under load: nothing written) sent again.
  const more: RestResult[] = [];
  for (let at = 0; at < fits + 5; at += 20) {
    more.push(...await Promise.all(Array.from({ length: Math.min(20, fits + 5 - at) }, async (_, j) => {
      for (let attempt = 0; ; attempt++) {
        const r = await postSign(url, bootstrap.api_key, body(at + j), `after-${at + j}`);
        if (r.status !== 503 || attempt > 20) return r;
        await new Promise((res) => setTimeout(res, 20 * (attempt + 1)));
      }
    })));
  }
  expect(more.filter((r) => r.status === 200)).toHaveLength(fits);
  expect(more.filter((r) => r.status === 403)).toHaveLength(5);
  const after = ledger(file, agentId);
  expect(after.buckets).toEqual(after.derived);
  expect(usdToMicros('5') - after.held < usdToMicros('0.04')).toBe(true);
});
