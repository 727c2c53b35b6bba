import { existsSync, mkdtempSync, openSync, closeSync, rmSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, test } from 'vitest';
import { spawnServer } from './harness.js';

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

/** A data directory after a real first start and a clean stop, with `fillerRows` rows of 400 bytes. */
async function populatedDataDir(fillerRows = 0): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'paypolicy-startup-'));
  roots.push(root);
  const dataDir = join(root, 'data');
  const first = spawnServer({ dataDir });
  const s = await first.process;
  s.child.kill('SIGTERM');
  expect((await s.exited).code).toBe(0);
  if (fillerRows > 0) {
    // A table the service never reads: damage to it is only found by the check at start.
    const db = new Database(join(dataDir, 'paypolicy.db'));
    db.exec('CREATE TABLE test_filler (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
    const insert = db.prepare('INSERT INTO test_filler (body) VALUES (?)');
    db.transaction(() => {
      for (let i = 0; i < fillerRows; i++) insert.run(`${i}`.padEnd(400, 'x'));
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
  }
  return dataDir;
}

/** Overwrites one whole page in the middle of the filler table with garbage. */
function corruptMiddlePage(file: string): number {
  const db = new Database(file, { readonly: true });
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const pages = (db.prepare("SELECT pageno FROM dbstat WHERE name = 'test_filler' ORDER BY pageno").all() as { pageno: number }[]).map((r) => r.pageno);
  db.close();
  const page = pages[Math.floor(pages.length / 2)]!;
  const fd = openSync(file, 'r+');
  writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, (page - 1) * pageSize);
  closeSync(fd);
  return page;
}

describe('start-up integrity', () => {
  test('error: a database with a damaged page in the middle is refused, naming the file; --skip-integrity-check starts anyway', async () => {
    const dataDir = await populatedDataDir(3000);
    const file = join(dataDir, 'paypolicy.db');
    corruptMiddlePage(file);

    const refused = spawnServer({ dataDir });
    await expect(refused.process).rejects.toThrow();
    expect((await refused.exited).code).toBe(2);
    const { stderr } = refused.output();
    expect(stderr).toContain(`paypolicy: cannot start: ${file} is damaged`);
    expect(stderr).toContain('restore it from a backup');

    // The escape hatch, for operators who run the check offline.
    const skipped = spawnServer({ dataDir, args: ['--skip-integrity-check'] });
    const s = await skipped.process;
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });

  test('error: a populated database without its master.key fails to start and no new master.key is left behind', async () => {
    const dataDir = await populatedDataDir();
    const keyFile = join(dataDir, 'master.key');
    unlinkSync(keyFile);

    const refused = spawnServer({ dataDir });
    await expect(refused.process).rejects.toThrow();
    expect((await refused.exited).code).toBe(2);
    expect(refused.output().stderr).toContain(`${keyFile} is missing`);
    expect(existsSync(keyFile)).toBe(false);
    // Nothing else was created in its place either.
    expect(statSync(join(dataDir, 'paypolicy.db')).size).toBeGreaterThan(0);
  });
});
