import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, test } from 'vitest';
import { startCheckpointer } from '../../src/store/checkpointer.js';
import { openStore } from '../../src/store/store.js';
import { overlappingReaders } from '../helpers/overlappingReaders.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-walrestart-'));
  dirs.push(dir);
  return join(dir, 'p.db');
}

const VALUE = 'v'.repeat(3000);
const KEYS = 300;
const IN_FLIGHT = 32;

/**
 * Writes that never pause: IN_FLIGHT writes always queued, each replacing one of KEYS settings of
 * 3,000 bytes (a page each), until `total` writes are acknowledged. Every group commit starts as the
 * last one ends, so the checkpoint thread never finds the WAL idle. Returns the largest WAL file
 * seen and the last value acknowledged for each key.
 */
async function sustainedWrites(store: ReturnType<typeof openStore>, file: string, total: number): Promise<{ maxWal: number; acked: Map<string, string> }> {
  let next = 0;
  let maxWal = 0;
  const acked = new Map<string, string>();
  const loop = async () => {
    while (next < total) {
      const n = next++;
      const key = `k${n % KEYS}`;
      const value = `${n}:${VALUE}`;
      await store.writes.run(() => store.settings.set(key, value));
      // Keys are written round-robin, so a later write of the same key was queued after this one.
      if (Number(acked.get(key)?.split(':', 1)[0] ?? -1) < n) acked.set(key, value);
      maxWal = Math.max(maxWal, statSync(`${file}-wal`).size);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, loop));
  return { maxWal, acked };
}

describe('WAL restart under writes that never pause', () => {
  test('behavior: the WAL file stays bounded, and every acknowledged write is in the database after a reopen', async () => {
    const file = tempDb();
    const store = openStore(file, { capRows: false, checkpoints: { intervalMs: 20, restartFrames: 500 } });
    let result: Awaited<ReturnType<typeof sustainedWrites>>;
    try {
      // 15,000 pages of 4 KiB written in all: ~60 MB of WAL frames if the WAL were never started over.
      result = await sustainedWrites(store, file, 15_000);
    } finally {
      await store.close();
    }
    // 500 frames before a restart is asked for, plus what lands in one 20 ms round and the catch-up.
    expect(result.maxWal).toBeLessThan(12 * 1024 * 1024);
    const db = new Database(file, { readonly: true });
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      const get = db.prepare('SELECT value FROM settings WHERE key = ?').pluck();
      for (const [key, value] of result.acked) expect(get.get(key)).toBe(value);
    } finally {
      db.close();
    }
  }, 60_000);

  test('behavior: readers of another process that always overlap do not keep the WAL from starting over', async () => {
    const file = tempDb();
    const store = openStore(file, { capRows: false, checkpoints: { intervalMs: 20, restartFrames: 500 } });
    try {
      await store.writes.run(() => store.settings.set('k0', VALUE));
      const readers = overlappingReaders(file, 2_500);
      // The reader process is up and reading before the writes start.
      await new Promise((r) => setTimeout(r, 300));
      const { maxWal } = await sustainedWrites(store, file, 25_000);
      await readers;
      expect(maxWal).toBeLessThan(16 * 1024 * 1024);
    } finally {
      await store.close();
    }
  }, 60_000);

  test('behavior: a pause runs between two commits with no transaction open, and the writes queued after it wait for it', async () => {
    const file = tempDb();
    const store = openStore(file, { capRows: false });
    try {
      const order: string[] = [];
      let release!: () => void;
      const first = store.writes.run(() => {
        store.settings.set('a', '1');
        order.push('write a');
      });
      const paused = store.writes.pause(async () => {
        order.push(`pause, in a transaction: ${store.db.inTransaction}`);
        await new Promise<void>((r) => (release = r));
        order.push('pause ends');
        return 'done';
      });
      const second = store.writes.run(() => {
        store.settings.set('b', '2');
        order.push('write b');
      });
      await first;
      await new Promise((r) => setTimeout(r, 50));
      expect(order).toEqual(['write a', 'pause, in a transaction: false']);
      expect(store.settings.get('b')).toBeUndefined();
      release();
      await expect(paused).resolves.toBe('done');
      await second;
      expect(order).toEqual(['write a', 'pause, in a transaction: false', 'pause ends', 'write b']);
      expect(store.settings.get('b')).toBe('2');
    } finally {
      await store.close();
    }
  });

  test('behavior: a pause that throws rejects its own promise only; the writes after it commit', async () => {
    const file = tempDb();
    const store = openStore(file, { capRows: false });
    try {
      const paused = store.writes.pause(() => Promise.reject(new Error('checkpoint thread gone')));
      // Throwing before it returns a promise is the same.
      const thrown = store.writes.pause((): Promise<void> => {
        throw new Error('no promise');
      });
      const after = store.writes.run(() => store.settings.set('c', '3'));
      await expect(paused).rejects.toThrow('checkpoint thread gone');
      await expect(thrown).rejects.toThrow('no promise');
      await after;
      expect(store.settings.get('c')).toBe('3');
    } finally {
      await store.close();
    }
  });
});

/**
 * A WAL database with its own auto-checkpoint off, one row in table t, a read-only second
 * connection and a checkpoint thread that checkpoints only when asked; all closed after `fn`.
 */
async function withWalDb(fn: (db: Database.Database, reader: Database.Database, checkpointer: ReturnType<typeof startCheckpointer>) => Promise<void>): Promise<void> {
  const file = tempDb();
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('CREATE TABLE t (v TEXT)');
  db.prepare('INSERT INTO t VALUES (?)').run('before');
  const reader = new Database(file, { readonly: true });
  const checkpointer = startCheckpointer(file, () => {}, { intervalMs: 60_000 });
  try {
    await fn(db, reader, checkpointer);
  } finally {
    await checkpointer.close();
    reader.close();
    db.close();
  }
}

describe('checkpointer catch-up', () => {
  test('behavior: a catch-up starts the WAL over, but not while a reader still holds an older snapshot', async () => {
    await withWalDb(async (db, reader, checkpointer) => {
      const insert = db.prepare('INSERT INTO t VALUES (?)');
      const walFrames = () => (db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>)[0]!.log;
      // The reader's snapshot predates the next commit, whose frames the checkpoint must then leave.
      reader.exec('BEGIN');
      reader.prepare('SELECT count(*) FROM t').get();
      insert.run('after');
      await expect(checkpointer.catchUp({ retryMs: 30, waitMs: 5_000 })).resolves.toBe(false);
      const before = walFrames();
      expect(before).toBeGreaterThan(2);
      reader.exec('COMMIT');
      await expect(checkpointer.catchUp({ retryMs: 30, waitMs: 5_000 })).resolves.toBe(true);
      // Started over: the next commit's frames are the first of the WAL.
      insert.run('restarted');
      expect(walFrames()).toBeLessThan(before);
      expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(3);
    });
  });

  test('behavior: a reader that began before the last frame was copied delays the start-over until it ends, within the retries', async () => {
    await withWalDb(async (_db, reader, checkpointer) => {
      // Its snapshot is the newest, so every frame can be copied; its WAL read lock still blocks a
      // start-over until it ends, 40 ms into a catch-up that retries for 500.
      reader.exec('BEGIN');
      reader.prepare('SELECT count(*) FROM t').get();
      setTimeout(() => reader.exec('COMMIT'), 40);
      const started = performance.now();
      await expect(checkpointer.catchUp({ retryMs: 500, waitMs: 5_000 })).resolves.toBe(true);
      expect(performance.now() - started).toBeGreaterThanOrEqual(35);
    });
  });

  test('error: a catch-up asked after the thread was closed answers false at once', async () => {
    const file = tempDb();
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    const checkpointer = startCheckpointer(file, () => {});
    await checkpointer.close();
    await expect(checkpointer.catchUp({ retryMs: 0, waitMs: 5_000 })).resolves.toBe(false);
    db.close();
  });
});
