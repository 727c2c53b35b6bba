/**
 * The use cases' one transaction interface: how a use case makes its writes atomic and durable,
 * without knowing how the store commits (src/store/unitOfWork.ts implements it over SQLite; a
 * PostgreSQL one would implement the same contract).
 *
 * Contract:
 * - `write(fn)` runs `fn` as one atomic transaction, serialized with every other write: `fn`
 *   sees everything committed before it, nothing interleaves with it, and either all of its
 *   writes happen or none do (when `fn` throws, none do, and the promise rejects with its error).
 *   `fn` is synchronous: nothing awaits while the transaction is open. The promise resolves only
 *   once the commit is durable (synced to disk), so an answer sent after it never runs ahead of
 *   the disk. A commit that fails rejects every write it carried; after a failed sync the store
 *   refuses all further writes (fail-stop).
 * - `writeNow(fn)` is the same for the few callers that cannot await (synchronous use cases such
 *   as admin edits and sign-in): it returns once the commit is durable, at the cost of a sync of
 *   its own. Hot paths (signing, deciding, collecting) use `write`. Over a network database these
 *   callers would become async and use `write`.
 * - `read(fn)` runs `fn` against one consistent snapshot; `fn` must not write.
 * - `durable()` resolves once everything committed before the call is durable: a read whose
 *   result is answered (an idempotent replay of a row another request committed) waits for it.
 * Inside `fn`, further `writeNow` and `read` calls join the running transaction.
 */
export type UnitOfWork = {
  write<T>(fn: () => T): Promise<T>;
  writeNow<T>(fn: () => T): T;
  read<T>(fn: () => T): T;
  durable(): Promise<void>;
};
