import { assertWritable, failStop, isIoError, storageFullOr, type Db } from './db.js';
import type { WriteOptions } from './port.js';
import type { WalSync } from './walSync.js';

/** A write (grouped, or `alone`), or a `pause`: a function run in its turn with no transaction open. */
type Item<X> = { fn: (tx: X) => unknown; kind: 'group' | 'alone' | 'pause'; resolve: (v: unknown) => void; reject: (e: unknown) => void };

export type WriteQueue<X = unknown> = {
  /**
   * Runs `fn` in the next group commit; resolves after that commit is durable. With `alone`, in a
   * transaction of its own committed with synchronous=FULL (SQLite syncs the WAL itself, on this
   * thread, not on libuv's pool), still in turn with every other write.
   */
  run<T>(fn: (tx: X) => T | Promise<T>, options?: WriteOptions): Promise<T>;
  /**
   * Resolves once everything committed before the call is durable. A read that an answer
   * depends on (an idempotent replay) may see a group commit whose sync is still running.
   */
  durable(): Promise<void>;
  /**
   * Runs `work` in its turn, between two commits, with no write transaction open; the writes
   * queued after it wait until it settles. For a checkpoint that needs the writes to stop
   * (store.ts): under writes that never pause, SQLite never starts the WAL over.
   */
  pause<T>(work: () => Promise<T>): Promise<T>;
};

/**
 * Group commit. Writes queued during one turn of the event loop run one after another inside a
 * single BEGIN IMMEDIATE transaction, each in its own savepoint, and share one fsync at COMMIT.
 * While a WAL sync runs, a finished group is not committed: its transaction stays open, the next
 * groups join it, and it commits when that sync ends (commitHeld), so one sync carries all of it.
 * Each write function is awaited before the next starts, so each still sees everything written
 * before it and decisions stay serialized; a write that throws rolls back only its own savepoint.
 * One group at a time: a group whose functions await (the store interface is asynchronous) keeps
 * its transaction open across those awaits, and the next group starts after its COMMIT. Callers
 * hear back only after the commit is synced to disk (walSync.ts does that off the event loop), so
 * every answer that depends on a write is sent after that write is durable. Kept by hand because
 * it is measured: with two `synchronous=FULL` commits per payment the sign path signed 472/s, a
 * fraction of what grouped commits allow (docs/performance.md). `tx` is what each function is handed: the
 * table groups over this connection. A write queued `alone` runs in its turn as a transaction of
 * its own, committed with synchronous=FULL (what writeTxn does at start-up).
 */
export function createWriteQueue<X>(db: Db, wal: WalSync, tx: X): WriteQueue<X> {
  let queue: Array<Item<X>> = [];
  let scheduled = false;
  let running = false;
  // better-sqlite3's own transaction helper refuses functions that return a promise: the
  // statements are run by hand, as it runs them.
  const begin = db.prepare('BEGIN IMMEDIATE');
  const commit = db.prepare('COMMIT');
  const rollback = db.prepare('ROLLBACK');
  const savepoint = db.prepare('SAVEPOINT group_write');
  const release = db.prepare('RELEASE group_write');
  const rollbackTo = db.prepare('ROLLBACK TO group_write');

  // A group whose writes are done but whose COMMIT waits for the WAL sync now running: its
  // transaction stays open and the next writes join it, so one COMMIT and one sync carry them all.
  let held: Array<{ item: Item<X>; ok: boolean; value: unknown }> | undefined;

  function schedule(): void {
    if (scheduled || running || queue.length === 0) return;
    scheduled = true;
    setImmediate(() => void flush());
  }

  /**
   * The transaction failed as a whole: every write in it is refused, and an I/O failure stops the
   * store. Rolled back only when it is this queue's own: a BEGIN refused because some other
   * transaction is open must not end that one.
   */
  function refuseAll(items: Array<Item<X>>, err: unknown, owned: boolean): void {
    if (owned && db.inTransaction) rollback.run();
    // A commit that failed on I/O leaves the disk in an unknown state: stop (db.ts failStop).
    if (isIoError(err)) failStop(db, err);
    const refused = storageFullOr(err);
    for (const item of items) item.reject(refused);
  }

  /** Runs `batch` inside the held transaction (opening one), each write in its own savepoint. */
  async function runGroup(batch: Array<Item<X>>): Promise<void> {
    let done = 0;
    try {
      assertWritable(db);
      if (!held) {
        begin.run();
        held = [];
      }
      for (const item of batch) {
        savepoint.run();
        try {
          const value = await item.fn(tx);
          release.run();
          held.push({ item, ok: true, value });
        } catch (err) {
          // SQLite rolled the whole transaction back (a full disk, an I/O error): every write of
          // the group is gone, so the group fails as one.
          if (!db.inTransaction) throw err;
          rollbackTo.run();
          release.run();
          held.push({ item, ok: false, value: err });
        }
        done++;
      }
    } catch (err) {
      const group = held;
      held = undefined;
      refuseAll([...(group ?? []).map((h) => h.item), ...batch.slice(done)], err, group !== undefined);
    }
  }

  /**
   * Commits the held group; its writes are answered once a sync that started after the COMMIT
   * has finished. Why held at all: a COMMIT writes every page the group changed to the WAL, and
   * the pages shared by all payments (the ledger's last page, each index's last page, the hot
   * cap buckets) were written again by every group; committing while a sync runs made no write
   * durable any sooner, since the next sync starts only when that one ends.
   */
  function commitHeld(): void {
    const group = held;
    if (!group) return;
    held = undefined;
    try {
      // After a failed sync nothing more is committed: the group is refused as not durable.
      assertWritable(db);
      commit.run();
    } catch (err) {
      refuseAll(group.map((h) => h.item), err, true);
      return;
    }
    wal.afterCommit().then(
      () => group.forEach((h) => (h.ok ? h.item.resolve(h.value) : h.item.reject(h.value))),
      (err: unknown) => group.forEach((h) => h.item.reject(err)),
    );
  }
  // A sync has ended and the next has not started: the held group commits now and rides on it.
  // While a batch runs, the batch's end does that instead.
  wal.onSettled(() => {
    if (!running) commitHeld();
  });

  /** A write alone: BEGIN IMMEDIATE, COMMIT with synchronous=FULL; durable when COMMIT returns. */
  async function commitAlone(item: Item<X>): Promise<void> {
    try {
      assertWritable(db);
      db.pragma('synchronous = FULL');
      try {
        begin.run();
        let value: unknown;
        try {
          value = await item.fn(tx);
          commit.run();
        } catch (err) {
          if (db.inTransaction) rollback.run();
          throw err;
        }
        item.resolve(value);
      } finally {
        if (db.open) db.pragma('synchronous = NORMAL');
      }
    } catch (err) {
      if (isIoError(err)) failStop(db, err);
      item.reject(storageFullOr(err));
    }
  }

  async function flush(): Promise<void> {
    scheduled = false;
    running = true;
    const batch = queue;
    queue = [];
    try {
      // In the order queued: runs of grouped writes share a commit, an `alone` write has its own,
      // and a pause runs between two commits.
      for (let i = 0; i < batch.length;) {
        const item = batch[i]!;
        if (item.kind === 'alone') {
          commitHeld();
          await commitAlone(item);
          i++;
          continue;
        }
        if (item.kind === 'pause') {
          commitHeld();
          // Through a promise: a function that throws before returning one still rejects its own pause.
          await Promise.resolve().then(item.fn as () => Promise<unknown>).then(item.resolve, item.reject);
          i++;
          continue;
        }
        let j = i;
        while (j < batch.length && batch[j]!.kind === 'group') j++;
        await runGroup(batch.slice(i, j));
        i = j;
      }
    } finally {
      running = false;
      if (!wal.busy()) commitHeld();
      schedule();
    }
  }

  return {
    run<T>(fn: (tx: X) => T | Promise<T>, options?: WriteOptions): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        assertWritable(db);
        queue.push({ fn, kind: options?.alone === true ? 'alone' : 'group', resolve: resolve as (v: unknown) => void, reject });
        schedule();
      });
    },
    pause<T>(work: () => Promise<T>): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ fn: work, kind: 'pause', resolve: resolve as (v: unknown) => void, reject });
        schedule();
      });
    },
    durable(): Promise<void> {
      return wal.afterCommit();
    },
  };
}
