import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, test } from 'vitest';
import { failStop } from '../../src/store/db.js';
import { createWalSync } from '../../src/store/walSync.js';
import { createWriteQueue } from '../../src/store/writeQueue.js';
import { openStore } from '../../src/store/store.js';
import { manualSync } from '../helpers/manualSync.js';

/**
 * The write queue holds a group's COMMIT while a WAL sync runs (the next sync could not start
 * sooner anyway), so later writes join the same transaction. What must not move: nothing is
 * answered before a sync that started after its COMMIT has finished; nothing held is visible to a
 * reader before it commits; a failed sync refuses what was held; a write that throws is rolled
 * back alone; an `alone` write or a pause commits what is held first.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const turns = async (n = 3) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

/** A store whose writes go through a queue with a manual WAL sync, and a reader on another connection. */
async function setUp() {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-hold-'));
  dirs.push(dir);
  const file = join(dir, 'p.db');
  const store = openStore(file, { capRows: false });
  // The WAL file exists once something has committed.
  await store.writes.run((tx) => tx.settings.set('boot', '1'));
  const m = manualSync();
  // As store.ts wires it: a failed sync stops the database.
  const queue = createWriteQueue(store.db, createWalSync(`${file}-wal`, m.sync, (err) => failStop(store.db, err)), store.tx);
  const reader = new Database(file, { readonly: true });
  const visible = (key: string) => (reader.prepare('SELECT value FROM settings WHERE key = ?').pluck().get(key) as string | undefined) ?? null;
  const set = (key: string) => queue.run((tx) => tx.settings.set(key, key));
  const watch = <T>(p: Promise<T>) => {
    const state = { settled: false, ok: false, error: undefined as unknown };
    p.then(() => Object.assign(state, { settled: true, ok: true }), (error: unknown) => Object.assign(state, { settled: true, error }));
    return state;
  };
  const close = async () => {
    reader.close();
    await store.close();
  };
  /** Finishes the first `n` syncs, in order, each in its own turn. */
  const syncs = async (n: number) => {
    for (let i = 0; i < n; i++) {
      m.complete(i);
      await turns();
    }
  };
  return { store, queue, m, visible, set, watch, syncs, close };
}

describe('write queue: a group commit held while a WAL sync runs', () => {
  test('behavior: writes made while a sync runs commit together once it ends, and are answered only after the next sync', async () => {
    const t = await setUp();
    try {
      const a = t.watch(t.set('a'));
      await turns();
      expect(t.m.calls()).toBe(1);
      expect(t.visible('a')).toBe('a');
      const b = t.watch(t.set('b'));
      await turns();
      const c = t.watch(t.set('c'));
      await turns();
      // Done inside the held transaction: not committed, not answered.
      expect([t.visible('b'), t.visible('c')]).toEqual([null, null]);
      expect([a.settled, b.settled, c.settled]).toEqual([false, false, false]);
      t.m.complete(0);
      await turns();
      expect(a.ok).toBe(true);
      // Committed as the first sync ended, before the second started: durable only after it.
      expect([t.visible('b'), t.visible('c')]).toEqual(['b', 'c']);
      expect(t.m.calls()).toBe(2);
      expect([b.settled, c.settled]).toEqual([false, false]);
      t.m.complete(1);
      await turns();
      expect([b.ok, c.ok]).toEqual([true, true]);
    } finally {
      await t.close();
    }
  });

  test('error: a failed sync refuses the writes held behind it, and none of them is ever committed', async () => {
    const t = await setUp();
    try {
      const a = t.watch(t.set('a'));
      await turns();
      const b = t.watch(t.set('b'));
      await turns();
      t.m.complete(0, Object.assign(new Error('EIO'), { code: 'EIO' }));
      await turns();
      expect(a.error).toBeInstanceOf(Error);
      expect(b.error).toBeInstanceOf(Error);
      expect(t.visible('b')).toBeNull();
      expect(t.store.db.inTransaction).toBe(false);
      await expect(t.set('later')).rejects.toThrow(/storage failed earlier/);
      expect(t.visible('later')).toBeNull();
    } finally {
      await t.close();
    }
  });

  test('behavior: a held write that throws is rolled back alone; the writes around it commit', async () => {
    const t = await setUp();
    try {
      void t.set('a');
      await turns();
      const b = t.watch(t.set('b'));
      const bad = t.watch(t.queue.run(async (tx) => {
        await tx.settings.set('bad', 'bad');
        throw new Error('refused');
      }));
      const d = t.watch(t.set('d'));
      await turns();
      await t.syncs(2);
      expect([b.ok, d.ok]).toEqual([true, true]);
      expect((bad.error as Error).message).toBe('refused');
      expect([t.visible('b'), t.visible('bad'), t.visible('d')]).toEqual(['b', null, 'd']);
    } finally {
      await t.close();
    }
  });

  test('behavior: a write alone and a pause commit what is held first, in order', async () => {
    const t = await setUp();
    try {
      void t.set('a');
      await turns();
      const b = t.watch(t.set('b'));
      await turns();
      expect(t.visible('b')).toBeNull();
      // Alone: its own transaction, synced by SQLite at COMMIT; the held group commits before it.
      await t.queue.run((tx) => tx.settings.set('alone', t.visible('b') ?? 'b not committed first'), { alone: true });
      expect(t.visible('alone')).toBe('b');
      expect(b.settled).toBe(false);
      const e = t.watch(t.set('e'));
      await turns();
      expect(t.visible('e')).toBeNull();
      // A pause runs with no transaction open: what was held is committed before it.
      const seen = await t.queue.pause(async () => ({ open: t.store.db.inTransaction, e: t.visible('e') }));
      expect(seen).toEqual({ open: false, e: 'e' });
      await t.syncs(2);
      expect([b.ok, e.ok]).toEqual([true, true]);
    } finally {
      await t.close();
    }
  });

  test('error: a BEGIN refused because another transaction is open leaves that transaction alone', async () => {
    const t = await setUp();
    try {
      // Not this queue's transaction (another writer on the same connection, as tests that swap the
      // queue have): refusing the write must not roll it back.
      t.store.db.prepare('BEGIN').run();
      t.store.db.prepare("INSERT INTO settings (key, value) VALUES ('theirs', 'theirs')").run();
      await expect(t.set('x')).rejects.toThrow(/within a transaction/);
      expect(t.store.db.inTransaction).toBe(true);
      t.store.db.prepare('COMMIT').run();
      expect(t.visible('theirs')).toBe('theirs');
    } finally {
      await t.close();
    }
  });
});
