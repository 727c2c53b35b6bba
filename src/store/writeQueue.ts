import { assertWritable, failStop, isIoError, storageFullOr, type Db } from './db.js';
import type { WalSync } from './walSync.js';

type Item = { fn: () => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void };

export type WriteQueue = {
  /** Runs `fn` in the next group commit; resolves after that commit is durable. */
  run<T>(fn: () => T): Promise<T>;
  /**
   * Resolves once everything committed before the call is durable. A read that an answer
   * depends on (an idempotent replay) may see a group commit whose sync is still running.
   */
  durable(): Promise<void>;
};

/**
 * Group commit. Writes queued during one turn of the event loop run one after another inside a
 * single BEGIN IMMEDIATE transaction, each in its own savepoint, and share one fsync at COMMIT.
 * Each still sees everything written before it, so decisions stay serialized; a write that throws
 * rolls back only its own savepoint. Callers hear back only after the commit is synced to disk
 * (walSync.ts does that off the event loop), so every answer that depends on a write is sent
 * after that write is durable. Kept by hand because it is measured: the first version, two
 * `synchronous=FULL` commits per payment, signed 472/s; grouping led the way to ~2,900/s (README, Speed).
 */
export function createWriteQueue(db: Db, wal: WalSync): WriteQueue {
  let queue: Item[] = [];
  let scheduled = false;
  // A nested better-sqlite3 transaction is a SAVEPOINT, released or rolled back alone.
  const savepoint = db.transaction((fn: () => unknown) => fn());

  function flush(): void {
    scheduled = false;
    const batch = queue;
    queue = [];
    const outcomes: Array<{ ok: boolean; value: unknown }> = [];
    try {
      assertWritable(db);
      db.transaction(() => {
        for (const item of batch) {
          try {
            outcomes.push({ ok: true, value: savepoint(item.fn) });
          } catch (err) {
            outcomes.push({ ok: false, value: err });
          }
        }
      }).immediate();
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

  return {
    run<T>(fn: () => T): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        assertWritable(db);
        queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
    durable(): Promise<void> {
      return wal.afterCommit();
    },
  };
}
