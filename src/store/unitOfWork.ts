import { writeTxn, type Db } from './db.js';
import type { WriteQueue } from './writeQueue.js';

/**
 * The app's unit of work (src/app/unitOfWork.ts has the contract) over the one SQLite connection:
 * `write` is the group commit (writeQueue.ts: one fsync shared by the writes of one event-loop
 * turn, each in its own savepoint), `writeNow` a BEGIN IMMEDIATE transaction committed with
 * synchronous=FULL (db.ts writeTxn), `read` a deferred transaction. `store.writes` is looked up
 * on every call, so a queue swapped in later (tests hold its syncs) is the one used.
 */
export function createUnitOfWork(store: { db: Db; writes: WriteQueue }) {
  return {
    write: <T>(fn: () => T): Promise<T> => store.writes.run(fn),
    writeNow: <T>(fn: () => T): T => writeTxn(store.db, fn),
    read: <T>(fn: () => T): T => (store.db.inTransaction ? fn() : store.db.transaction(fn).deferred()),
    durable: (): Promise<void> => store.writes.durable(),
  };
}
