import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, test } from 'vitest';

/**
 * The password-hashing thread is started lazily and again after every idle period (to save
 * memory). Starting it can fail synchronously: `new Worker` throws ERR_WORKER_INIT_FAILED when no
 * thread can be created, and the worker's file may be gone (a package upgraded in place under a
 * running server, which starts that thread many times over its life). Such a failure must fail
 * the one hash with a clear error and leave the hasher as it was: a sign-in slot never leaks (8
 * leaked slots would refuse every dashboard sign-in with "queue is full" until a restart), queued jobs
 * are not stranded, nothing is thrown into an event listener, and once the thread can start again
 * hashes work without a restart.
 *
 * Real modules, a real missing file: the built hasher (npm test builds first) is copied to a
 * directory of its own without its worker file and run in a child process.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const FILES = ['app/accounts/auth/passwordHasher.js', 'app/accounts/auth/passwordHashWorker.js', 'singleExecutable/workerFiles.js', 'singleExecutable/runtime.js'];
const dir = mkdtempSync(join(tmpdir(), 'paypolicy-lazy-workers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SCRIPT = `
import { copyFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { hashForAccount, hashForSignIn, passwordHasherState } from './src/app/accounts/auth/passwordHasher.js';
const params = { N: 1024, r: 8, p: 1 };
const out = { errors: [], states: [] };
process.on('uncaughtException', (e) => { out.uncaught = String(e); });
// Twelve sign-ins (more than the 8 slots) and account hashes, one at a time and all at once.
for (let i = 0; i < 12; i++) {
  try { await hashForSignIn('pw', randomBytes(16), params, 32); out.errors.push('ok'); } catch (e) { out.errors.push(e.name); }
}
const burst = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => (i % 2 ? hashForSignIn : hashForAccount)('pw', randomBytes(16), params, 32)));
out.burst = burst.map((r) => r.status === 'fulfilled' ? 'ok' : r.reason.name);
out.state = passwordHasherState();
// The file is back: the next hashes start the thread and succeed.
copyFileSync(process.argv[2], './src/app/accounts/auth/passwordHashWorker.js');
out.after = (await Promise.allSettled([hashForSignIn('pw', randomBytes(16), params, 32), hashForAccount('pw', randomBytes(16), params, 32)])).map((r) => r.status);
out.final = passwordHasherState();
console.log(JSON.stringify(out));
process.exit(0);
`;

test('a hashing thread that cannot start fails only its hash: no sign-in slot leaks, nothing stranded, recovers without a restart', () => {
  for (const f of FILES) {
    const from = join(ROOT, 'dist/src', f);
    if (!existsSync(from)) throw new Error(`${from} is missing: run \`npm run build\` (npm test does)`);
    if (f === 'app/accounts/auth/passwordHashWorker.js') continue;
    mkdirSync(join(dir, 'src', f, '..'), { recursive: true });
    copyFileSync(from, join(dir, 'src', f));
  }
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
  writeFileSync(join(dir, 'run.mjs'), SCRIPT);
  const env = { ...process.env };
  delete env.PAYPOLICY_TEST_WORKERS_DIR;
  const out = JSON.parse(execFileSync(process.execPath, ['run.mjs', join(ROOT, 'dist/src/app/accounts/auth/passwordHashWorker.js')], { cwd: dir, env, encoding: 'utf8', timeout: 20_000 }));
  expect(out.uncaught).toBeUndefined();
  // Every sign-in failed for the missing thread, none for a full queue.
  expect(out.errors).toEqual(Array(12).fill('Error'));
  expect(out.burst).toEqual(Array(6).fill('Error'));
  expect(out.state).toEqual({ lastThreadId: undefined, waitingSignIns: 0, threadRunning: false });
  expect(out.after).toEqual(['fulfilled', 'fulfilled']);
  expect(out.final.waitingSignIns).toBe(0);
  expect(out.final.threadRunning).toBe(true);
});
