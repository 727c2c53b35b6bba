import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { StoreTables, UnitOfWork } from '../port.js';
import { databaseBusy, databaseUnavailable, domainErrorOf, isRetryable, isUnavailable } from './errors.js';
import { migratePg } from './migrate.js';
import { createSql, TYPES } from './sql.js';
import { ScopeCache } from '../registryCache.js';
import { createPgTables, type TableHooks } from './tables.js';

export type PgStoreOptions = {
  /** postgres://user:password@host:port/database (credentials never appear in errors). */
  connectionString: string;
  /** Connections in this process's pool (default 10). Every replica has its own pool. */
  poolSize?: number;
  /** Server-side statement_timeout of every statement, ms (default 5000); also bounds lock waits. */
  statementTimeoutMs?: number;
  /** Opening a connection, or waiting for a free one in a full pool, fails after this many ms (default 2000). */
  connectTimeoutMs?: number;
  /** The server ends a session idle inside an open transaction for this long, freeing its locks (default 10000). */
  idleInTransactionTimeoutMs?: number;
  /** Runs of one write before it gives up with 503 database_busy (default 40). */
  maxWriteAttempts?: number;
  /** Errors of idle pooled connections (a server restart): the pool drops them and reconnects on demand. */
  onError?: (err: Error) => void;
};

/**
 * The PostgreSQL store: every table group bound to a connection pool for reads of committed data,
 * and a unit of work (the contract is ../port.ts):
 *
 * - `write(fn)` runs `fn(tx)` in BEGIN ISOLATION LEVEL SERIALIZABLE on one pooled connection and
 *   COMMITs. PostgreSQL's serializable isolation makes concurrent writes behave as if run one at a
 *   time, across every replica sharing the database: the cap check (sum, compare, insert) cannot
 *   overshoot, whichever replicas the racing payments hit. A transaction that would break that is
 *   rolled back with serialization_failure (40001), or deadlock_detected (40P01), and `fn` runs
 *   again on a fresh snapshot, up to `maxWriteAttempts` runs; then 503 database_busy, with
 *   nothing written. `fn` must therefore have no effect outside `tx`. A run that lost on a named
 *   hot spot (Sql.contend: an agent's cap, a treasury's nonce counter) runs again holding a
 *   session advisory lock on it, taken before BEGIN, so the retries of one hot spot take turns
 *   (a 1,000-way race on one agent: ~1.1-1.2 runs per write instead of ~9); others pause for a
 *   jittered, growing moment. The locks are given back when the write ends.
 *   The promise resolves only after COMMIT returned, and COMMIT returns only once the commit
 *   record is flushed (synchronous_commit, checked at start), so `durable()` has nothing to wait for.
 * - A COMMIT that reports ROLLBACK (a statement of `fn` failed and `fn` swallowed the error) is
 *   never taken for success: the write rejects with that statement's error.
 * - `read(fn)` runs `fn(tx)` in REPEATABLE READ READ ONLY: one snapshot, nothing written.
 * - Unreachable or slow database: connecting, or waiting for a free connection, fails after
 *   `connectTimeoutMs`; a statement after `statementTimeoutMs` (on the server) or a second more
 *   (in the driver, for a server that stopped answering). Either way 503 database_unavailable,
 *   never a hang; the pool opens new connections once the server is back.
 */
export async function createPgStore(options: PgStoreOptions) {
  const statementTimeoutMs = options.statementTimeoutMs ?? 5000;
  const connectTimeoutMs = options.connectTimeoutMs ?? 2000;
  const maxWriteAttempts = options.maxWriteAttempts ?? 40;
  const base = {
    connectionString: options.connectionString,
    types: TYPES,
    connectionTimeoutMillis: connectTimeoutMs,
    keepAlive: true,
    application_name: 'paypolicy',
  };

  // Migrations on a connection of their own, without the statement timeout (a migration, or
  // waiting for another replica's, may take longer than any request should).
  const admin = new pg.Client(base);
  admin.on('error', () => {});
  try {
    await admin.connect();
    await assertDurableCommits(admin);
    await migratePg(admin);
  } catch (err) {
    await admin.end().catch(() => {});
    throw isUnavailable(err) ? databaseUnavailable(err) : err;
  }
  await admin.end();

  const pool = new pg.Pool({
    ...base,
    max: options.poolSize ?? 10,
    statement_timeout: statementTimeoutMs,
    // The driver's own bound, for a server that accepted the statement and then went silent.
    query_timeout: statementTimeoutMs + 1000,
    idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? 10_000,
  });
  // Without a listener an idle connection's error (server restart) would crash the process.
  pool.on('error', (err) => options.onError?.(err));
  let open = true;

  // One registry cache for the replica: without it every transaction's tables would start empty and
  // each deciding write would read its organization's whole registry again.
  const hooks: TableHooks = { approvals: {}, registry: new ScopeCache() };
  const tables = createPgTables(createSql(pool, { mapError: (e) => (isUnavailable(e) ? databaseUnavailable(e) : e) }), hooks);

  async function transaction<T>(mode: 'write' | 'read', fn: (tx: StoreTables) => Promise<T>): Promise<T> {
    const begin = mode === 'write' ? 'BEGIN ISOLATION LEVEL SERIALIZABLE' : 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY';
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw databaseUnavailable(err);
    }
    let broken = false;
    // A checked-out client has no listener of the pool's: without this, a connection that dies
    // mid-transaction would raise an uncaught 'error' (the failing query rejects as well).
    const onClientError = () => {
      broken = true;
    };
    client.on('error', onClientError);
    // Hot spots that made an earlier run lose a race; held (session advisory locks) until the end.
    const locked = new Set<string>();
    try {
      for (let attempt = 1; ; attempt++) {
        const after: Array<() => void> = [];
        const contended = new Set<string>();
        let statementError: unknown;
        let committing = false;
        try {
          await client.query(begin);
          const tx = createPgTables(createSql(client, { afterCommit: after, contended, onError: (e) => (statementError ??= e), writable: mode === 'write' }), hooks);
          const result = await fn(tx);
          committing = true;
          const done = await client.query('COMMIT');
          if (done.command !== 'COMMIT') throw statementError ?? new Error('the transaction was rolled back at COMMIT');
          for (const f of after) f();
          return result;
        } catch (err) {
          // A statement that failed inside `fn` decides, whatever `fn` made of it: after a
          // serialization failure everything `fn` read in this run is void.
          const cause = statementError ?? err;
          if (isUnavailable(cause) || isUnavailable(err)) {
            broken = true;
            throw databaseUnavailable(cause, { attempt, ...(committing ? { commitOutcome: 'unknown' } : {}) });
          }
          try {
            await client.query('ROLLBACK');
          } catch (rollbackError) {
            broken = true;
            throw databaseUnavailable(rollbackError, { attempt });
          }
          if (!isRetryable(cause) && !isRetryable(err)) throw domainErrorOf(err, cause);
          if (attempt >= maxWriteAttempts) throw databaseBusy(cause, attempt);
          // Queue behind whoever else lost a race on the same hot spots: the lock is taken before
          // BEGIN, so the next run's snapshot starts after the previous holder committed. Without
          // a named hot spot (or with its locks already held), a jittered pause spreads the runs.
          const keys = [...contended].filter((k) => !locked.has(k)).sort();
          if (keys.length === 0) await sleep(backoffMs(attempt));
          try {
            for (const key of keys) {
              await client.query({ name: 'pp.lockHotSpot', text: 'SELECT pg_advisory_lock(hashtextextended($1, 0))', values: [key] });
              locked.add(key);
            }
          } catch (lockError) {
            // Keys learned in a later run may be taken out of order: a deadlock among them is
            // detected by the server (40P01); give every lock back and race again.
            if (!isRetryable(lockError)) {
              broken = true;
              throw isUnavailable(lockError) ? databaseUnavailable(lockError, { attempt }) : lockError;
            }
            await client.query('SELECT pg_advisory_unlock_all()');
            locked.clear();
          }
        }
      }
    } finally {
      if (!broken && locked.size > 0) {
        try {
          await client.query('SELECT pg_advisory_unlock_all()');
        } catch {
          broken = true;
        }
      }
      // A connection in an unknown state is closed, never reused (its session ends, with its locks).
      client.removeListener('error', onClientError);
      client.release(broken ? true : undefined);
    }
  }

  return {
    ...tables,
    pool,
    uow: {
      write: <T>(fn: (tx: StoreTables) => Promise<T>): Promise<T> => transaction('write', fn),
      read: <T>(fn: (tx: StoreTables) => Promise<T>): Promise<T> => transaction('read', fn),
      /** A COMMIT that returned is already durable (synchronous_commit). */
      durable: (): Promise<void> => Promise.resolve(),
    } satisfies UnitOfWork,
    /** PostgreSQL has no fail-stop state of its own: a failed commit is reported to its caller. */
    failure: (): Error | undefined => undefined,
    onFailure: (_listener: (err: Error) => void): void => {},
    /** No WAL sync of ours to time: the server syncs before COMMIT returns. */
    onWalSync: (_listener: (seconds: number) => void): void => {},
    isOpen: (): boolean => open,
    /** For /readyz: resolves when the database answers now, rejects with 503 database_unavailable otherwise. */
    async ping(): Promise<void> {
      try {
        await pool.query('SELECT 1');
      } catch (err) {
        throw databaseUnavailable(err);
      }
    },
    async close(): Promise<void> {
      if (!open) return;
      open = false;
      await pool.end();
    },
  };
}
export type PgStore = Awaited<ReturnType<typeof createPgStore>>;

/**
 * Full jitter over a doubling ceiling (1 ms, 2 ms, … capped at 64 ms): racing writers spread out
 * instead of colliding again in lockstep.
 */
function backoffMs(attempt: number): number {
  return Math.random() * Math.min(64, 2 ** (attempt - 1));
}

/**
 * An answer must never run ahead of the disk: refuse to start on a server (or a role or database
 * setting) that acknowledges commits before flushing them. synchronous_commit 'on' is the default;
 * 'remote_write' and 'remote_apply' flush locally too and add a standby; 'local' flushes locally.
 */
async function assertDurableCommits(client: pg.Client): Promise<void> {
  const sync = (await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]?.synchronous_commit;
  const fsync = (await client.query<{ fsync: string }>('SHOW fsync')).rows[0]?.fsync;
  if (sync === 'off') {
    throw new Error('PostgreSQL has synchronous_commit = off: a commit could be acknowledged and then lost. Set it to on (the default) for this database or role');
  }
  if (fsync !== 'on') {
    throw new Error('PostgreSQL runs with fsync = off: commits are not made durable. Turn fsync on');
  }
}
