import type { StoreTables } from '../store/asyncStore.js';
import type { AppDeps } from './deps.js';

/**
 * The deps a write function hands to helpers and nested use cases: every store read and write goes
 * through the write's `tx`, and a nested `uow.write` or `uow.read` joins that transaction instead of
 * queueing a second one (which would wait for the first forever). Nothing else changes: the
 * clock, the vault, the logger are the caller's.
 */
export function withinWrite(deps: AppDeps, tx: StoreTables): AppDeps {
  return {
    ...deps,
    store: { ...deps.store, ...tx },
    uow: { write: (fn) => fn(tx), read: (fn) => fn(tx), durable: () => deps.uow.durable() },
  };
}
