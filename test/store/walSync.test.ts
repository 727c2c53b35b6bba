import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { createWalSync } from '../../src/store/walSync.js';
import { openStore } from '../../src/store/store.js';
import { manualSync } from '../helpers/manualSync.js';

const dirs: string[] = [];
function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-wal-'));
  dirs.push(dir);
  const file = join(dir, 'x.db-wal');
  writeFileSync(file, '');
  return file;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const tick = () => new Promise((r) => setImmediate(r));

describe('createWalSync', () => {
  test('behavior: a commit is acknowledged only after a sync that started after it has finished', async () => {
    const m = manualSync();
    const wal = createWalSync(tempFile(), m.sync);
    let first = false;
    let second = false;
    void wal.afterCommit().then(() => (first = true));
    expect(m.calls()).toBe(1);
    // Committed while the first sync runs: that sync may not cover it.
    void wal.afterCommit().then(() => (second = true));
    expect(m.calls()).toBe(1);
    m.complete(0);
    await tick();
    expect(first).toBe(true);
    expect(second).toBe(false);
    expect(m.calls()).toBe(2);
    m.complete(1);
    await tick();
    expect(second).toBe(true);
    wal.close();
  });

  test('behavior: commits that land during one sync share the next one', async () => {
    const m = manualSync();
    const wal = createWalSync(tempFile(), m.sync);
    const done: boolean[] = [];
    void wal.afterCommit().then(() => done.push(true));
    for (let i = 0; i < 50; i++) void wal.afterCommit().then(() => done.push(true));
    m.complete(0);
    await tick();
    expect(m.calls()).toBe(2);
    m.complete(1);
    await tick();
    expect(done.length).toBe(51);
    expect(m.calls()).toBe(2);
    wal.close();
  });

  test('error: a failed sync rejects the commits it was meant to cover', async () => {
    const m = manualSync();
    const wal = createWalSync(tempFile(), m.sync);
    const result = wal.afterCommit();
    m.complete(0, Object.assign(new Error('EIO'), { code: 'EIO' }));
    await expect(result).rejects.toThrow('EIO');
    wal.close();
  });

  test('error: a failed sync is final: later commits are refused even when a sync would succeed, and the owner is told once', async () => {
    const m = manualSync();
    const failures: Error[] = [];
    const wal = createWalSync(tempFile(), m.sync, (err) => failures.push(err));
    const first = wal.afterCommit();
    const during = wal.afterCommit(); // waits for the next sync, which never comes
    m.complete(0, Object.assign(new Error('EIO'), { code: 'EIO' }));
    await expect(first).rejects.toThrow('EIO');
    await expect(during).rejects.toThrow('EIO');
    await expect(wal.afterCommit()).rejects.toThrow('EIO');
    expect(m.calls()).toBe(1);
    expect(failures).toHaveLength(1);
    wal.close();
  });

  test('behavior: with the real fdatasync, group-committed writes resolve and are readable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-wal-'));
    dirs.push(dir);
    const store = openStore(join(dir, 'p.db'));
    try {
      const writes = Array.from({ length: 20 }, (_, i) => store.writes.run(() => store.settings.set(`k${i}`, String(i))));
      await Promise.all(writes);
      expect(store.settings.get('k19')).toBe('19');
    } finally {
      await store.close();
    }
  });
});
