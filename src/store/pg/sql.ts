import pg from 'pg';

/**
 * One SQL statement with a fixed name: node-postgres prepares it once per connection under that
 * name and afterwards only binds values (the SQLite modules' `db.prepare` once, `run` many).
 * Names are global, so a second statement under the same name with other text is a bug.
 */
export type Statement = { readonly name: string; readonly text: string };

const registered = new Map<string, string>();

/** Declares a named statement (at module load). */
export function statement(name: string, text: string): Statement {
  const known = registered.get(name);
  if (known !== undefined && known !== text) throw new Error(`two SQL statements named ${name}`);
  registered.set(name, text);
  return { name: `pp.${name}`, text };
}

/** Where statements run: the pool (each call on any free connection, autocommit) or one client inside a transaction. */
export type Runner = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

/**
 * What a table group needs from its connection: run a statement, and defer a side effect (a
 * metrics callback) until the transaction it belongs to has committed.
 */
export type Sql = {
  rows<R>(s: Statement, values?: unknown[]): Promise<R[]>;
  one<R>(s: Statement, values?: unknown[]): Promise<R | undefined>;
  /** Rows as arrays in the statement's column order (SQLite's `raw`), for statements both stores share. */
  tuples(s: Statement, values?: unknown[]): Promise<unknown[][]>;
  /** Runs a statement and returns how many rows it changed (SQLite's `changes`). */
  run(s: Statement, values?: unknown[]): Promise<number>;
  /** Runs `fn` once the enclosing transaction commits (at once outside a transaction); never when it rolls back. */
  afterCommit(fn: () => void): void;
  /**
   * Names a hot spot this transaction reads and writes (an agent's cap, a treasury's nonce
   * counter). Should the transaction lose a serialization race, its retry first queues on an
   * advisory lock per named key (store.ts), so racing retries take turns instead of colliding again.
   */
  contend(key: string): void;
  /** True inside a write transaction: the only place a derived row (a window's running sums) may be written. */
  readonly writable: boolean;
};

export type SqlOptions = {
  /** Deferred callbacks of the running transaction; absent outside a transaction (run at once). */
  afterCommit?: Array<() => void>;
  /** Called with the first statement error, so a COMMIT that turned into ROLLBACK can say why. */
  onError?: (err: unknown) => void;
  /** Hot spots named by the running transaction (Sql.contend); absent outside a transaction. */
  contended?: Set<string>;
  /** Turns a driver error into what callers see (the pool's reads: an outage becomes 503). */
  mapError?: (err: unknown) => unknown;
  /** A write transaction's statements (Sql.writable). */
  writable?: boolean;
};

export function createSql(runner: Runner, options: SqlOptions = {}): Sql {
  const failed = (err: unknown): unknown => {
    options.onError?.(err);
    return options.mapError ? options.mapError(err) : err;
  };
  const exec = async (s: Statement, values: unknown[] = []) => {
    try {
      return await runner.query({ name: s.name, text: s.text, values });
    } catch (err) {
      throw failed(err);
    }
  };
  return {
    async rows<R>(s: Statement, values?: unknown[]) {
      return (await exec(s, values)).rows as R[];
    },
    async one<R>(s: Statement, values?: unknown[]) {
      return (await exec(s, values)).rows[0] as R | undefined;
    },
    async tuples(s: Statement, values: unknown[] = []) {
      try {
        return (await runner.query({ name: s.name, text: s.text, values, rowMode: 'array' })).rows as unknown[][];
      } catch (err) {
        throw failed(err);
      }
    },
    async run(s: Statement, values?: unknown[]) {
      return (await exec(s, values)).rowCount ?? 0;
    },
    afterCommit(fn) {
      if (options.afterCommit) options.afterCommit.push(fn);
      else fn();
    },
    contend(key) {
      options.contended?.add(key);
    },
    writable: options.writable ?? false,
  };
}

const INT8 = 20;

/**
 * Type parsers of every connection of the store: BIGINT (int8) is read as bigint, never as a
 * string or a double, so no amount or time passes through a float; each table group converts to
 * number exactly where its SQLite twin returns a number. BYTEA stays a Buffer (the default).
 */
export const TYPES = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8 && format !== 'binary') return (v: string) => BigInt(v);
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

/** BIGINT → number for columns the SQLite module returns as number (ids of chains, times, counts). */
export function num(v: bigint | number): number {
  return Number(v);
}
export function numOrNull(v: bigint | number | null): number | null {
  return v === null ? null : Number(v);
}
