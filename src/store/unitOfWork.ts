import type { StoreTables, UnitOfWork, WriteOptions } from './port.js';
import type { Db } from './db.js';
import type { WriteQueue } from './writeQueue.js';

/**
 * The port's unit of work (port.ts states the contract) over SQLite: `write` is the
 * group commit on the writer connection (writeQueue.ts: one fsync shared by the writes of one
 * event-loop turn, each in its own savepoint, each awaited before the next starts), or with
 * `alone` a transaction of its own committed with synchronous=FULL; `read` a
 * deferred transaction on a read-only connection of its own (store.ts snapshot), one at a time,
 * so the plain reads on the reader connection never see an old snapshot. `store.writes` is looked
 * up on every call, so a queue swapped in later (tests hold its syncs) is the one used.
 */
export function createUnitOfWork(store: { writes: WriteQueue<StoreTables>; snapshot(): { db: Db; tables: StoreTables } }): UnitOfWork {
  let reading: Promise<unknown> = Promise.resolve();
  return {
    write: <T>(fn: (tx: StoreTables) => Promise<T>, options?: WriteOptions): Promise<T> => store.writes.run(fn, options),
    read<T>(fn: (tx: StoreTables) => Promise<T>): Promise<T> {
      const run = async (): Promise<T> => {
        const { db, tables } = store.snapshot();
        db.prepare('BEGIN DEFERRED').run();
        try {
          return await fn(tables);
        } finally {
          if (db.inTransaction) db.prepare('COMMIT').run();
        }
      };
      const result = reading.then(run, run);
      reading = result.catch(() => undefined);
      return result;
    },
    durable: (): Promise<void> => store.writes.durable(),
  };
}
