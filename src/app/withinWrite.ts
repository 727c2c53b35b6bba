import type { StoreTables } from '../store/port.js';
import type { AppDeps } from './deps.js';

/** One view per (deps, tx): both live as long as the app and its store connection. */
const views = new WeakMap<AppDeps, WeakMap<StoreTables, AppDeps>>();

/**
 * The deps a write function hands to helpers and nested use cases: every store read and write goes
 * through the write's `tx`, and a nested `uow.write` or `uow.read` joins that transaction instead of
 * queueing a second one (which would wait for the first forever). Nothing else changes: the
 * clock, the vault, the logger are the caller's.
 *
 * The view depends on nothing but the two objects, so it is built once per pair and reused:
 * built per write it was ~0.6 KiB of garbage per payment on the event loop (deps are never
 * reassigned after the app is made, so a remembered view cannot go stale).
 */
export function withinWrite(deps: AppDeps, tx: StoreTables): AppDeps {
  let byTx = views.get(deps);
  if (!byTx) views.set(deps, (byTx = new WeakMap()));
  let view = byTx.get(tx);
  if (!view) {
    view = {
      ...deps,
      store: { ...deps.store, ...tx },
      uow: { write: (fn) => fn(tx), read: (fn) => fn(tx), durable: () => deps.uow.durable() },
    };
    byTx.set(tx, view);
  }
  return view;
}
