import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { capBucketOf } from '../migrations/0010_cap_buckets.js';
import { CAP_BUCKETS_UNION, SQLITE_ONLY_TABLES } from '../migrations/0012_cap_buckets_hot.js';
import { MIGRATIONS } from '../migrations/index.js';
import { assertSameMigrations } from '../migrationNames.js';
import { lockDataDir } from '../dataDir.js';
import { migratePg } from './migrate.js';
import { TYPES } from './sql.js';

/**
 * `paypolicy migrate-store`: moves a SQLite deployment (its data directory's paypolicy.db) into an
 * empty PostgreSQL database, whole and consistent, or not at all.
 *
 * - The source is read in ONE read transaction (a WAL snapshot), with the data directory's lock
 *   held, so no server can write it meanwhile and every table is read at the same instant.
 * - The target is written in ONE PostgreSQL transaction: the schema is brought to this build's
 *   version first (PostgreSQL's migrations, under their advisory lock), then every table is locked
 *   ACCESS EXCLUSIVE, checked empty (a replica that already bootstrapped makes it non-empty: refused),
 *   filled, and verified before COMMIT; any difference rolls everything back.
 * - Verification per table: the row count, the sum of every integer column, and a SHA-256 over every
 *   row in primary-key order (each value in a canonical form), computed from the source rows and
 *   from the rows PostgreSQL returns after the inserts. Counts and sums come from SQL on the target.
 *
 * Rows are copied as they are: statuses that are not initial states (signed, reverted, ...) are
 * legal histories the SQLite triggers already enforced, so the target's row triggers (which only
 * admit initial states on INSERT) are disabled for the copy inside the transaction and enabled again
 * before COMMIT. That includes the triggers that keep cap_buckets: the source's buckets are copied
 * as they are (not added to again) and checked against the sums of the copied transactions.
 * Foreign keys, CHECKs and unique indexes stay in force. Treasury keys are copied encrypted; the
 * master key that decrypts them stays in the data directory (or PAYPOLICY_MASTER_KEY) and must be
 * given to every replica.
 */

export type MigrateStoreOptions = {
  /** The SQLite data directory (holds paypolicy.db). */
  fromDir: string;
  /** postgres://… of the target database. */
  toUrl: string;
  /** Rows per INSERT statement (bounded by PostgreSQL's 65,535 parameters). */
  batchRows?: number;
  /** Progress lines (never secrets: only table names and counts). */
  log?: (line: string) => void;
};

export type TableReport = { table: string; rows: number; sums: Record<string, string>; sha256: string };
export type MigrateStoreReport = { schemaVersion: number; tables: TableReport[] };

export class MigrateStoreError extends Error {
  override name = 'MigrateStoreError';
}

type Column = { name: string; integer: boolean; pk: number };
type Table = { name: string; columns: Column[]; pk: string[]; rowid: boolean };

export async function migrateStore(options: MigrateStoreOptions): Promise<MigrateStoreReport> {
  const log = options.log ?? (() => {});
  const file = join(options.fromDir, 'paypolicy.db');
  if (!existsSync(file)) throw new MigrateStoreError(`${file} does not exist: --from must be the data directory of a SQLite deployment`);
  // Refuses while a server runs on the directory (it would keep writing what this copy misses).
  const lock = lockDataDir(options.fromDir);
  let db: Database.Database | undefined;
  const client = new pg.Client({ connectionString: options.toUrl, types: TYPES, connectionTimeoutMillis: 10_000, application_name: 'paypolicy migrate-store' });
  client.on('error', () => {});
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
    db.defaultSafeIntegers(true);
    db.pragma('busy_timeout = 5000');
    const version = sourceVersion(db);
    try {
      await client.connect();
    } catch (err) {
      throw new MigrateStoreError(`cannot connect to the target PostgreSQL: ${(err as Error).message}`);
    }
    const { applied } = await migratePg(client);
    if (applied.length > 0) log(`target: applied PostgreSQL migrations ${applied.join(', ')}`);

    // One snapshot of the source for everything below (WAL: it starts at the first read).
    db.prepare('BEGIN').run();
    db.prepare('SELECT count(*) FROM sqlite_master').get();
    const tables = orderByForeignKeys(db, sourceTables(db));
    await client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
    try {
      await checkTarget(client, tables);
      for (const t of tables) await client.query(`ALTER TABLE ${ident(t.name)} DISABLE TRIGGER USER`);
      const reports: TableReport[] = [];
      for (const t of tables) {
        await copyTable(db, client, t, options.batchRows ?? 500);
        reports.push(await verifyTable(db, client, t));
        log(`copied ${t.name}: ${reports[reports.length - 1]!.rows} rows`);
      }
      await verifyCapBuckets(client);
      for (const t of tables) await client.query(`ALTER TABLE ${ident(t.name)} ENABLE TRIGGER USER`);
      const done = await client.query('COMMIT');
      if (done.command !== 'COMMIT') throw new MigrateStoreError('PostgreSQL rolled the copy back at COMMIT; nothing was written');
      return { schemaVersion: version, tables: reports };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      if (db.inTransaction) db.prepare('ROLLBACK').run();
    }
  } finally {
    db?.close();
    await client.end().catch(() => {});
    lock.release();
  }
}

/** The source must be at exactly this build's schema: the two stores' migrations are numbered alike. */
function sourceVersion(db: Database.Database): number {
  const known = Math.max(...MIGRATIONS.map((m) => m.version));
  const row = db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: bigint | null } | undefined;
  const version = row?.v === null || row?.v === undefined ? 0 : Number(row.v);
  try {
    const applied = db.prepare('SELECT version, name FROM schema_migrations').all() as Array<{ version: bigint | number; name: string }>;
    assertSameMigrations(applied.map((r) => ({ version: Number(r.version), name: r.name })), MIGRATIONS);
  } catch (err) {
    throw new MigrateStoreError(`the SQLite ${(err as Error).message.replace(/^database /, 'database\'s ')}`);
  }
  if (version !== known) {
    throw new MigrateStoreError(version < known
      ? `the SQLite database is at schema version ${version}, this build at ${known}: start paypolicy on it once with this build (it migrates at start), stop it, then run migrate-store`
      : `the SQLite database is at schema version ${version}, newer than this build knows (${known}); use the paypolicy version that wrote it`);
  }
  return version;
}

/**
 * SQLite's own index of the cap rows (migration 0011) and its hot buckets (0012), derived from
 * transactions by its triggers: PostgreSQL has no such tables, so they are not copied as tables.
 */
const SQLITE_ONLY = new Set(SQLITE_ONLY_TABLES);

/** What a source table's rows are read from: cap_buckets is its two SQLite tables together (0012). */
const sourceOf = (name: string): string => (name === 'cap_buckets' ? CAP_BUCKETS_UNION : ident(name));

function sourceTables(db: Database.Database): Table[] {
  const names = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations' ORDER BY name").all() as Array<{ name: string }>)
    .map((r) => r.name).filter((name) => !SQLITE_ONLY.has(name));
  return names.map((name) => {
    const info = db.prepare(`SELECT name, type, pk FROM pragma_table_info(?)`).all(name) as Array<{ name: string; type: string; pk: bigint }>;
    const columns = info.map((c) => ({ name: c.name, integer: c.type.toUpperCase() === 'INTEGER', pk: Number(c.pk) }));
    const pk = columns.filter((c) => c.pk > 0).sort((a, b) => a.pk - b.pk).map((c) => c.name);
    const withoutRowid = /WITHOUT\s+ROWID/i.test((db.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) as { sql: string }).sql);
    if (pk.length === 0 && withoutRowid) throw new MigrateStoreError(`table ${name} has no primary key`);
    return { name, columns, pk, rowid: !withoutRowid };
  });
}

/** Parents before children, so every foreign key finds its row (PostgreSQL's are not deferrable). */
function orderByForeignKeys(db: Database.Database, tables: Table[]): Table[] {
  const parents = new Map(tables.map((t) => [t.name, new Set(
    (db.prepare('SELECT "table" AS parent FROM pragma_foreign_key_list(?)').all(t.name) as Array<{ parent: string }>)
      .map((r) => r.parent).filter((p) => p !== t.name),
  )]));
  const ordered: Table[] = [];
  const placed = new Set<string>();
  while (ordered.length < tables.length) {
    const next = tables.find((t) => !placed.has(t.name) && [...parents.get(t.name)!].every((p) => placed.has(p) || !parents.has(p)));
    if (!next) throw new MigrateStoreError('the source tables\' foreign keys form a cycle');
    ordered.push(next);
    placed.add(next.name);
  }
  return ordered;
}

/**
 * Target checks, inside the copy's transaction: every source table exists there with at least the
 * source's columns (a column only PostgreSQL has must fill itself: an identity or a default), and
 * every table of the schema is empty. Locks first, so nothing can write between check and copy.
 */
async function checkTarget(client: pg.Client, tables: Table[]): Promise<void> {
  const { rows } = await client.query<{ table_name: string; column_name: string; fillable: boolean }>(
    `SELECT table_name, column_name, (column_default IS NOT NULL OR is_identity = 'YES' OR is_nullable = 'YES') AS fillable
       FROM information_schema.columns WHERE table_schema = current_schema()`,
  );
  const target = new Map<string, Map<string, boolean>>();
  for (const r of rows) {
    if (!target.has(r.table_name)) target.set(r.table_name, new Map());
    target.get(r.table_name)!.set(r.column_name, r.fillable);
  }
  for (const t of tables) {
    const cols = target.get(t.name);
    if (!cols) throw new MigrateStoreError(`the target has no table ${t.name}`);
    for (const c of t.columns) if (!cols.has(c.name)) throw new MigrateStoreError(`the target's ${t.name} has no column ${c.name}`);
    for (const [name, fillable] of cols) {
      if (!fillable && !t.columns.some((c) => c.name === name)) throw new MigrateStoreError(`the target's ${t.name}.${name} has no source column and no default`);
    }
  }
  const all = [...target.keys()].filter((n) => n !== 'schema_migrations').sort();
  await client.query(`LOCK TABLE ${all.map(ident).join(', ')} IN ACCESS EXCLUSIVE MODE`);
  const nonEmpty: string[] = [];
  for (const name of all) {
    const { rows: any } = await client.query(`SELECT 1 FROM ${ident(name)} LIMIT 1`);
    if (any.length > 0) nonEmpty.push(name);
  }
  if (nonEmpty.length > 0) {
    throw new MigrateStoreError(`the target database is not empty (rows in ${nonEmpty.join(', ')}); migrate-store only copies into an empty database (was a replica started on it already?)`);
  }
}

async function copyTable(db: Database.Database, client: pg.Client, t: Table, batchRows: number): Promise<void> {
  const names = t.columns.map((c) => c.name);
  const perBatch = Math.max(1, Math.min(batchRows, Math.floor(60_000 / names.length)));
  // Insertion order follows the rowid where there is one, so an identity column of the target
  // (chain_attempts.seq, SQLite's rowid tie-break) numbers the rows in the source's order.
  const order = t.rowid ? 'rowid' : t.pk.map(ident).join(', ');
  const select = db.prepare(`SELECT ${names.map(ident).join(', ')} FROM ${sourceOf(t.name)} ORDER BY ${order}`).raw(true);
  let batch: unknown[][] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const values: unknown[] = [];
    const tuples = batch.map((row) => `(${row.map((v) => { values.push(toPg(v)); return `$${values.length}`; }).join(', ')})`);
    try {
      await client.query(`INSERT INTO ${ident(t.name)} (${names.map(ident).join(', ')}) VALUES ${tuples.join(', ')}`, values);
    } catch (err) {
      // A value SQLite held that PostgreSQL refuses (a NUL in text, say): name the table, not just the SQLSTATE.
      throw new MigrateStoreError(`copying ${t.name} failed: PostgreSQL refused a row (${(err as Error).message}); nothing was written`, { cause: err });
    }
    batch = [];
  };
  for (const row of select.iterate() as Iterable<unknown[]>) {
    batch.push(row);
    if (batch.length >= perBatch) await flush();
  }
  await flush();
}

/** Source and target agree on count, integer sums and the row digest, or the copy is rolled back. */
async function verifyTable(db: Database.Database, client: pg.Client, t: Table): Promise<TableReport> {
  const names = t.columns.map((c) => c.name);
  const order = (t.pk.length > 0 ? t.pk : names).map(ident).join(', ');
  const source = digestRows(t, db.prepare(`SELECT ${names.map(ident).join(', ')} FROM ${sourceOf(t.name)} ORDER BY ${order}`).raw(true).iterate() as Iterable<unknown[]>);

  const cursor = `pp_verify_${t.name}`;
  await client.query(`DECLARE ${ident(cursor)} NO SCROLL CURSOR FOR SELECT ${names.map(ident).join(', ')} FROM ${ident(t.name)} ORDER BY ${order}`);
  const chunks: unknown[][][] = [];
  for (;;) {
    const { rows } = await client.query({ text: `FETCH 2000 FROM ${ident(cursor)}`, rowMode: 'array' });
    if (rows.length === 0) break;
    chunks.push(rows as unknown[][]);
  }
  await client.query(`CLOSE ${ident(cursor)}`);
  const target = digestRows(t, chunks.flat());

  const ints = t.columns.filter((c) => c.integer);
  const { rows: [sql] } = await client.query<Record<string, string>>(
    `SELECT count(*)::text AS "count"${ints.map((c, i) => `, COALESCE(sum(${ident(c.name)}), 0)::text AS s${i}`).join('')} FROM ${ident(t.name)}`,
  );
  const sums: Record<string, string> = {};
  const problems: string[] = [];
  if (BigInt(sql!.count!) !== BigInt(source.rows)) problems.push(`${source.rows} rows in the source, ${sql!.count} in the target`);
  ints.forEach((c, i) => {
    const want = source.sums.get(c.name) ?? 0n;
    sums[c.name] = want.toString();
    if (BigInt(sql![`s${i}`]!) !== want) problems.push(`sum(${c.name}) is ${want} in the source, ${sql![`s${i}`]} in the target`);
  });
  if (target.rows !== source.rows || target.sha256 !== source.sha256) problems.push('the rows read back differ from the source rows');
  if (problems.length > 0) throw new MigrateStoreError(`verification of ${t.name} failed: ${problems.join('; ')}; nothing was written`);
  return { table: t.name, rows: source.rows, sums, sha256: source.sha256 };
}

/** Count, integer sums and a SHA-256 over rows in a form both drivers produce alike. */
function digestRows(t: Table, rows: Iterable<unknown[]>): { rows: number; sums: Map<string, bigint>; sha256: string } {
  const hash = createHash('sha256');
  const sums = new Map<string, bigint>();
  let n = 0;
  for (const row of rows) {
    n++;
    const parts = row.map((v, i) => {
      const col = t.columns[i]!;
      if (col.integer && v !== null) sums.set(col.name, (sums.get(col.name) ?? 0n) + BigInt(v as bigint));
      return canonical(v);
    });
    hash.update(JSON.stringify(parts));
    hash.update('\n');
  }
  return { rows: n, sums, sha256: hash.digest('hex') };
}

/**
 * cap_buckets is derived from transactions (the sums the cap check reads, migration 0010). It is
 * copied like any table, while the target's triggers are off (with them on, every copied row would
 * add to its bucket once more); then the copy must equal what the copied ledger implies, agent-hour
 * by agent-hour, or the cap would be checked against wrong sums from the first payment on.
 */
async function verifyCapBuckets(client: pg.Client): Promise<void> {
  const { rows: [r] } = await client.query<{ n: string }>(`WITH derived AS (
      SELECT agent_id, ${capBucketOf('cap_at')} AS bucket, SUM(amount_micros) AS total FROM transactions WHERE holds_cap = 1
      GROUP BY agent_id, ${capBucketOf('cap_at')})
    SELECT count(*)::text AS n FROM cap_buckets b FULL JOIN derived d ON d.agent_id = b.agent_id AND d.bucket = b.bucket
    WHERE COALESCE(b.total, 0) <> COALESCE(d.total, 0)`);
  if (BigInt(r!.n) !== 0n) {
    throw new MigrateStoreError(`verification of cap_buckets failed: ${r!.n} agent-hour sums differ from the copied transactions' (the source's cap_buckets is damaged); nothing was written`);
  }
}

function canonical(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint' || typeof v === 'number') return `i:${BigInt(v)}`;
  if (Buffer.isBuffer(v)) return `b:${v.toString('hex')}`;
  if (typeof v === 'string') return `s:${v}`;
  throw new MigrateStoreError(`unexpected value of type ${typeof v}`);
}

function toPg(v: unknown): unknown {
  // bigint goes as its decimal text (exact); everything else as the driver sends it.
  return typeof v === 'bigint' ? v.toString() : v;
}

function ident(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new MigrateStoreError(`unexpected table or column name ${JSON.stringify(name)}`);
  return `"${name}"`;
}
