import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { rest } from '../helpers/server.js';
import { spawnServer } from '../faults/harness.js';

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});
const newRoot = () => {
  const r = mkdtempSync(join(tmpdir(), 'paypolicy-datadir-'));
  roots.push(r);
  return r;
};
const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8);

describe('the data directory is private', () => {
  for (const umask of ['000', '022']) {
    test(`property: under umask ${umask}, the directory is 0700 and every file in it (db, -wal, -shm, master.key, bootstrap.json) 0600`, async () => {
      const dataDir = join(newRoot(), 'data');
      const s = await spawnServer({ dataDir, umask }).process;
      try {
        const bootstrap = JSON.parse(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')) as { api_key: string; agent_id: string };
        // A committed write, so the WAL and its index exist and hold data.
        const ping = await rest(s.url, 'POST', '/api/ping', { key: bootstrap.api_key, body: { agent_id: bootstrap.agent_id }, headers: { connection: 'close' } });
        expect(ping.status).toBe(200);
        const files = readdirSync(dataDir).sort();
        expect(files).toEqual(expect.arrayContaining(['bootstrap.json', 'master.key', 'paypolicy.db', 'paypolicy.db-shm', 'paypolicy.db-wal']));
        expect(modeOf(dataDir)).toBe('700');
        expect(Object.fromEntries(files.map((f) => [f, modeOf(join(dataDir, f))]))).toEqual(Object.fromEntries(files.map((f) => [f, '600'])));
      } finally {
        s.child.kill('SIGTERM');
        await s.exited;
      }
    });
  }

  test('error: a data directory that group or others can enter is refused with a line naming it and the fix', async () => {
    const dataDir = join(newRoot(), 'data');
    const first = await spawnServer({ dataDir }).process;
    first.child.kill('SIGTERM');
    await first.exited;
    chmodSync(dataDir, 0o755);
    const refused = spawnServer({ dataDir });
    await expect(refused.process).rejects.toThrow();
    expect((await refused.exited).code).toBe(2);
    expect(refused.output().stderr).toContain(`data directory ${dataDir} is accessible by group or others (mode 755); run: chmod 700 ${dataDir}`);
  });

  test('behavior: files an older version left readable (0644) are narrowed to 0600 at start, with a warning', async () => {
    const dataDir = join(newRoot(), 'data');
    const first = await spawnServer({ dataDir, umask: '022' }).process;
    first.child.kill('SIGTERM');
    await first.exited;
    for (const f of ['paypolicy.db', 'bootstrap.json']) chmodSync(join(dataDir, f), 0o644);
    writeFileSync(join(dataDir, 'notes.txt'), 'operator notes\n', { mode: 0o644 });
    const s = await spawnServer({ dataDir }).process;
    for (const f of ['paypolicy.db', 'bootstrap.json', 'notes.txt']) expect.soft(modeOf(join(dataDir, f)), f).toBe('600');
    s.child.kill('SIGTERM');
    await s.exited;
    // Log lines are buffered until the stop flushes them.
    const warn = s.stdout().split('\n').find((l) => l.includes('narrowed files readable by group or others'));
    expect(warn).toBeDefined();
    expect(JSON.parse(warn!).files.sort()).toEqual(['bootstrap.json', 'notes.txt', 'paypolicy.db']);
  });
});
