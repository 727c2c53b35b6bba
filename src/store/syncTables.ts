import type { StoreTables } from './port.js';

/**
 * A repository of the port (port.ts) as the SQLite modules implement it: the same methods,
 * parameters and results, answered synchronously on the connection (better-sqlite3 never waits).
 * Each SQLite module declares this of its repository, so the compiler checks it against the port.
 */
export type Synchronous<T> = { [K in keyof T]: T[K] extends (...a: infer A) => Promise<infer R> ? (...a: A) => R : never };

/** The synchronous SQLite repositories over one connection (store.ts builds two sets: writer and reader). */
export type SyncTables = { [K in keyof StoreTables]: Synchronous<StoreTables[K]> };

/**
 * One repository's methods as async functions. Built once per store, not per call: a call costs
 * one settled promise (a microtask), no extra statement. A synchronous throw becomes a rejection.
 */
function asyncTable(table: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(table)) {
    if (typeof method !== 'function') continue;
    const fn = method as (...a: unknown[]) => unknown;
    out[name] = async (...a: unknown[]) => fn(...a);
  }
  return out;
}

/** Every repository of `tables` as the port's async interface over the same connection. */
export function asyncTables(tables: SyncTables): StoreTables {
  const out: Record<string, unknown> = {};
  for (const [name, table] of Object.entries(tables)) out[name] = asyncTable(table);
  return out as unknown as StoreTables;
}
