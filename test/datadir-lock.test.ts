import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { DataDirInUseError, LOCK_FILE } from '../src/store/dataDir.js';
import { spawnCli, type CliProcess } from './helpers/cli.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

const roots: string[] = [];
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});
const newDataDir = () => {
  const r = mkdtempSync(join(tmpdir(), 'paypolicy-lock-'));
  roots.push(r);
  return join(r, 'data');
};

/** `paypolicy serve` on `dataDir`, port 0, killed with SIGKILL after the test if still running. */
function serve(dataDir: string): CliProcess {
  const p = spawnCli(['serve', '--port', '0', '--data-dir', dataDir, '--signer-threads', '1']);
  cleanups.push(() => p.child.kill('SIGKILL'));
  return p;
}
const listeningUrl = async (p: CliProcess) => /(?:listening on |curl -s -X POST )(http:\/\/127\.0\.0\.1:\d+)/.exec(await p.waitForStdout(/(listening on|curl -s -X POST) http:\/\/127\.0\.0\.1:\d+/))![1]!;
const healthz = (url: string) => rest(url, 'GET', '/healthz', { headers: { connection: 'close' } });

describe('one server per data directory', { timeout: 60_000 }, () => {
  test('error: a second server process on the same data directory exits 2 with one line naming the directory; the first keeps serving', async () => {
    const dataDir = newDataDir();
    const first = serve(dataDir);
    const url = await listeningUrl(first);
    const files = readdirSync(dataDir).sort();

    const second = serve(dataDir);
    expect(await second.exited).toEqual({ code: 2, signal: null });
    expect(second.stdout()).toBe('');
    expect(second.stderr()).toBe(
      `paypolicy: cannot start: data directory ${dataDir} is in use by another paypolicy process (it holds the lock on ${join(dataDir, LOCK_FILE)}); stop that process first, or give this one its own --data-dir\n`,
    );
    // The refused process created nothing (no second master key, database or bootstrap).
    expect(readdirSync(dataDir).sort()).toEqual(files);
    expect((await healthz(url)).status).toBe(200);

    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });
  });

  test('behavior: kill -9 leaves no stale lock: the next server starts at once on the same data directory', async () => {
    const dataDir = newDataDir();
    const first = serve(dataDir);
    await listeningUrl(first);
    first.child.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(true);

    const next = serve(dataDir);
    const url = await listeningUrl(next);
    expect(next.stdout()).toContain('paypolicy listening on');
    expect((await healthz(url)).status).toBe(200);
    next.child.kill('SIGTERM');
    expect(await next.exited).toEqual({ code: 0, signal: null });
  });

  test('attack: a lock file deleted, or replaced, while the server runs is locked again at once: a second server is still refused', async () => {
    const dataDir = newDataDir();
    const s = await startTestServer({ dataDir });
    cleanups.push(() => s.close());
    const lock = join(dataDir, LOCK_FILE);
    /** Resolves once a file bears the lock's name again (at most 5 s, then the test fails). */
    const reappeared = () => new Promise<boolean>((resolve) => {
      const w = watch(dataDir, () => existsSync(lock) && done(true));
      const t = setTimeout(() => done(existsSync(lock)), 5000);
      const done = (v: boolean) => (w.close(), clearTimeout(t), resolve(v));
      if (existsSync(lock)) done(true);
    });
    for (const tamper of [() => rmSync(lock), () => (writeFileSync(`${lock}.new`, ''), renameSync(`${lock}.new`, lock))]) {
      rmSync(`${lock}-journal`, { force: true });
      tamper();
      expect(await reappeared()).toBe(true);
      const second = serve(dataDir);
      expect(await second.exited).toMatchObject({ code: 2 });
      expect(second.stderr()).toContain('is in use by another paypolicy process');
      expect((await healthz(s.url)).status).toBe(200);
    }
  });

  test('error: a second start in the same process is refused too, and a stopped server frees the directory', async () => {
    const dataDir = newDataDir();
    let s: TestServer | undefined = await startTestServer({ dataDir });
    cleanups.push(() => s?.close());
    const refused = startTestServer({ dataDir });
    await expect(refused).rejects.toBeInstanceOf(DataDirInUseError);
    await expect(refused).rejects.toThrow(`data directory ${dataDir} is in use by another paypolicy process`);
    // The first is unharmed: the refused start must not have dropped its lock.
    const proc = serve(dataDir);
    expect(await proc.exited).toMatchObject({ code: 2 });
    expect(proc.stderr()).toContain('is in use by another paypolicy process');

    await s.close({ keepData: true });
    s = await startTestServer({ dataDir });
    expect((await healthz(s.url)).status).toBe(200);
  });
});
