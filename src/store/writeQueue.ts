import { assertWritable, failStop, isIoError, storageFullOr, type Db } from './db.js';
import type { WalSync } from './walSync.js';

/** A write (grouped, or `alone`), or a `pause`: a function run in its turn with no transaction open. */
type Item<X> = { fn: (tx: X) => unknown; kind: 'group' | 'alone' | 'pause'; resolve: (v: unknown) => void; reject: (e: unknown) => void };

/** How one write is committed; see UnitOfWork.write (src/app/unitOfWork.ts). */
export type WriteOptions = { alone?: boolean };

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
 * Each write function is awaited before the next starts, so each still sees everything written
 * before it and decisions stay serialized; a write that throws rolls back only its own savepoint.
 * One group at a time: a group whose functions await (the store interface is asynchronous) keeps
 * its transaction open across those awaits, and the next group starts after its COMMIT. Callers
 * hear back only after the commit is synced to disk (walSync.ts does that off the event loop), so
 * every answer that depends on a write is sent after that write is durable. Kept by hand because
 * it is measured: the first version, two `synchronous=FULL` commits per payment, signed 472/s;
 * grouping led the way to ~2,900/s (README, Speed). `tx` is what each function is handed: the
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

  function schedule(): void {
    if (scheduled || running || queue.length === 0) return;
    scheduled = true;
    setImmediate(() => void flush());
  }

  /** Runs one group in one transaction; the outcome of each write, or throws when the whole group failed. */
  async function runGroup(batch: Array<Item<X>>): Promise<Array<{ ok: boolean; value: unknown }>> {
    const outcomes: Array<{ ok: boolean; value: unknown }> = [];
    begin.run();
    try {
      for (const item of batch) {
        savepoint.run();
        try {
          const value = await item.fn(tx);
          release.run();
          outcomes.push({ ok: true, value });
        } catch (err) {
          // SQLite rolled the whole transaction back (a full disk, an I/O error): every write of
          // the group is gone, so the group fails as one.
          if (!db.inTransaction) throw err;
          rollbackTo.run();
          release.run();
          outcomes.push({ ok: false, value: err });
        }
      }
      commit.run();
    } catch (err) {
      if (db.inTransaction) rollback.run();
      throw err;
    }
    return outcomes;
  }

  /** One group commit: the writes share a transaction and a WAL sync off the event loop. */
  async function commitGroup(batch: Array<Item<X>>): Promise<void> {
    let outcomes: Array<{ ok: boolean; value: unknown }>;
    try {
      assertWritable(db);
      outcomes = await runGroup(batch);
    } catch (err) {
      // A commit that failed on I/O leaves the disk in an unknown state: stop (db.ts failStop).
      if (isIoError(err)) failStop(db, err);
      const refused = storageFullOr(err);
      for (const item of batch) item.reject(refused);
      return;
    }
    wal.afterCommit().then(
      () => batch.forEach((item, i) => (outcomes[i]!.ok ? item.resolve(outcomes[i]!.value) : item.reject(outcomes[i]!.value))),
      (err: unknown) => batch.forEach((item) => item.reject(err)),
    );
  }

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
          await commitAlone(item);
          i++;
          continue;
        }
        if (item.kind === 'pause') {
          // Through a promise: a function that throws before returning one still rejects its own pause.
          await Promise.resolve().then(item.fn as () => Promise<unknown>).then(item.resolve, item.reject);
          i++;
          continue;
        }
        let j = i;
        while (j < batch.length && batch[j]!.kind === 'group') j++;
        await commitGroup(batch.slice(i, j));
        i = j;
      }
    } finally {
      running = false;
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
