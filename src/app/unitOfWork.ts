import type { StoreTables } from '../store/asyncStore.js';

/**
 * The use cases' one transaction interface: how a use case makes its writes atomic and durable,
 * without knowing how the store commits (src/store/unitOfWork.ts implements it over SQLite; the
 * PostgreSQL store, src/store/pg/, implements the same contract).
 *
 * Contract:
 * - `write(fn)` runs `fn(tx)` as one atomic transaction, serialized with every other write: `fn`
 *   sees, through `tx`, everything committed before it, nothing interleaves with it, and either
 *   all of its writes happen or none do (when `fn` throws, none do, and the promise rejects with
 *   its error). Every read and write of `fn` goes through `tx` (never `deps.store`, which sees only
 *   committed data) and `fn` awaits nothing but `tx`. The promise resolves only once the commit is
 *   durable (synced to disk), so an answer sent after it never runs ahead of the disk. A commit that
 *   fails rejects every write it carried; after a failed sync the store refuses all further
 *   writes (fail-stop).
 *   `fn` MAY RUN MORE THAN ONCE (a PostgreSQL serialization failure is retried): it has no effect
 *   outside `tx` (in-memory state, logs, metrics happen after the awaited write, or are harmless
 *   when repeated). A write never opens another write (it would wait for itself): helpers that a
 *   write calls take its `tx`.
 * - `write(fn, { alone: true })` commits `fn` in a transaction of its own that is durable when its
 *   COMMIT returns, never waiting on a shared sync (SQLite: synchronous=FULL on the calling thread,
 *   not libuv's pool, which must not hold up sign-in or an operator's edit). For the admin,
 *   dashboard, sign-in and upkeep writes; hot paths (signing, deciding a payment, collecting) group.
 *   A store whose every commit is durable on its own (PostgreSQL) ignores it.
 * - `read(fn)` runs `fn(tx)` against one consistent snapshot of committed data; `fn` must not write.
 * - `durable()` resolves once everything committed before the call is durable: a read whose
 *   result is answered (an idempotent replay of a row another request committed) waits for it.
 */
export type UnitOfWork = {
  write<T>(fn: (tx: StoreTables) => Promise<T>, options?: { alone?: boolean }): Promise<T>;
  read<T>(fn: (tx: StoreTables) => Promise<T>): Promise<T>;
  durable(): Promise<void>;
};
