import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

/**
 * Stopping the signing threads while they sign. The threads call into libsecp256k1's N-API addon,
 * built with C++ exceptions: when a thread is terminated in the middle of such a call, the addon's
 * next Node-API call fails, its error cannot be thrown into a terminating thread, and the rethrow
 * ends in std::terminate, which aborts the whole process (SIGABRT), not just the thread. CI saw it
 * as `paypolicy serve` aborting on SIGTERM. The pool runs in a child process here, from dist/ (built
 * by `npm test`), so an abort is an exit status to assert on rather than the end of the test run.
 */
const POOL = fileURLToPath(new URL('../../dist/src/signing/signerPool.js', import.meta.url));

const CHILD = `
import { createSignerPool } from ${JSON.stringify(POOL)};
import { randomBytes } from 'node:crypto';
const pk = '0x' + randomBytes(32).toString('hex');
const domain = { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' };
const job = (i) => ({ kind: 'eip3009', orgId: 'org', domain, message: {
  from: '0x1111111111111111111111111111111111111111', to: '0x2222222222222222222222222222222222222222',
  value: BigInt(i + 1), validAfter: 0n, validBefore: 2n ** 40n, nonce: '0x' + randomBytes(32).toString('hex') } });
// The threads are unref'd (a server's listener keeps its process alive): this timer stands in.
const alive = setInterval(() => {}, 1000);
let signed = 0, refused = 0, other = [];
for (let round = 0; round < ROUNDS; round++) {
  const pool = createSignerPool(2, () => pk);
  await pool.sign(job(0));
  const all = Array.from({ length: 400 }, (_, i) => pool.sign(job(i)).then(
    (o) => { if (/^0x[0-9a-f]{130}$/.test(o.signature)) signed++; else other.push(o); },
    (e) => { if (e.message === 'signer pool closed') refused++; else other.push(e.message); }));
  await new Promise((r) => setTimeout(r, (round * 7) % 25));
  await pool.close();
  await Promise.all(all);
  await pool.sign(job(0)).then(() => other.push('signed after close'), (e) => { if (e.message !== 'signer pool closed') other.push(e.message); });
}
clearInterval(alive);
process.stdout.write(JSON.stringify({ signed, refused, other }));
`;

function runChild(rounds: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  // A file, not --eval: the pool's threads inherit the process's exec arguments.
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-signer-stop-'));
  const script = join(dir, 'child.mjs');
  writeFileSync(script, CHILD.replace('ROUNDS', String(rounds)));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('close', (code, signal) => {
      rmSync(dir, { recursive: true, force: true });
      resolve({ code, signal, stdout, stderr });
    });
  });
}

describe('signer pool close', () => {
  test('property: closing the pool while its threads sign never aborts the process; every job is answered or refused', async () => {
    const r = await runChild(12);
    expect({ code: r.code, signal: r.signal, stderr: r.stderr }).toEqual({ code: 0, signal: null, stderr: '' });
    const out = JSON.parse(r.stdout) as { signed: number; refused: number; other: unknown[] };
    expect(out.other).toEqual([]);
    expect(out.signed + out.refused).toBe(12 * 400);
    // Jobs already handed to a thread are finished, not dropped, so each round signs some.
    expect(out.signed).toBeGreaterThan(0);
  }, 60_000);
});
