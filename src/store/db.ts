import { chmodSync, closeSync, fchmodSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { DomainError } from '../domain/errors.js';
import { MIGRATIONS } from './migrations/index.js';
import { storageAdvice } from './storageAdvice.js';
import { assertSameMigrations } from './migrationNames.js';

export type Db = Database.Database;

export type OpenOptions = {
  /** Skip `PRAGMA quick_check` at open (operators who check offline); default false. */
  skipIntegrityCheck?: boolean;
};

/**
 * Opens the database file with the settings every writer relies on: WAL so reads never block the
 * writer, and foreign keys on. Commits are made durable in one of two ways, both before any answer
 * that depends on them is sent: writeTxn commits with synchronous=FULL (SQLite syncs the WAL
 * itself); the group-commit queue commits with NORMAL and syncs the WAL off the event loop
 * (walSync.ts). Applies pending migrations forward, each in its own transaction.
 */
export function openDatabase(file: string, options: OpenOptions = {}): Db {
  createPrivate(file);
  let db: Db | undefined;
  try {
    db = new Database(file);
    settleWal(db, file);
    if (!options.skipIntegrityCheck) checkIntegrity(db, file);
    configure(db);
    migrate(db);
    return db;
  } catch (err) {
    db?.close();
    throw explained(err, file);
  }
}

/**
 * Creates the database file, if missing, with mode 0600 whatever the umask, and narrows an
 * existing one (and its -wal and -shm) to 0600. SQLite creates -wal and -shm itself with the mode
 * of the database file, so they are private from the first byte too.
 */
function createPrivate(file: string): void {
  const fd = openSync(file, 'a', 0o600);
  try {
    fchmodSync(fd, 0o600);
  } finally {
    closeSync(fd);
  }
  for (const side of [`${file}-wal`, `${file}-shm`]) {
    try {
      chmodSync(side, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

/**
 * Makes everything this process can read durable before anything is answered from it. After a
 * failed sync and a restart in the same boot (the fail-stop exit), the page cache may still show
 * WAL frames that never reached the disk: a replay answered from them, and every commit appended
 * after them (a WAL is read only up to its first missing frame), would be lost at the next power
 * cut. A TRUNCATE checkpoint copies every frame into the database file, syncs it and empties the
 * WAL. Another process holding a snapshot (a backup, a second server) for longer than the busy
 * timeout stops start-up: the frames could not be settled.
 */
function settleWal(db: Db, file: string): void {
  if ((db.pragma('journal_mode', { simple: true }) as string) !== 'wal') return;
  db.pragma('busy_timeout = 5000');
  db.pragma('synchronous = FULL');
  const [r] = db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
  if (r?.busy) throw new Error(`${file} is held open by another process (a backup, a second paypolicy?); its write-ahead log could not be checkpointed. Stop it and start again`);
}

/**
 * `PRAGMA quick_check`: every page and every record is read and checked, indexes against their
 * tables are not (integrity_check, about 6x slower). Measured: 1.3 s for 1M payment rows (a 1 GB
 * file) read from the page cache; a cold start adds one sequential read of the file.
 */
function checkIntegrity(db: Db, file: string): void {
  const rows = db.pragma('quick_check(5)') as Array<{ quick_check: string }>;
  const problems = rows.map((r) => r.quick_check).filter((r) => r !== 'ok');
  if (problems.length > 0) throw new IntegrityError(file, problems.join('; '));
}

export class IntegrityError extends Error {
  override name = 'IntegrityError';
  constructor(file: string, detail: string) {
    super(`${file} is damaged (${detail}); restore it from a backup. Refusing to start on it (--skip-integrity-check skips this check)`);
  }
}

/**
 * SQLite's errors, wherever they surface while opening, name the file: corruption as damage, the
 * others with what to do (a full disk, a read-only file system).
 */
function explained(err: unknown, file: string): unknown {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return err;
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') return new IntegrityError(file, (err as Error).message);
  return new Error(`cannot open ${file} (${code}: ${(err as Error).message}); ${storageAdvice(code, dirname(file))}`, { cause: err });
}

function configure(db: Db): void {
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // Checkpoints run on a background connection (checkpointer.ts), never inside a commit here.
  db.pragma('wal_autocheckpoint = 0');
  // After a checkpoint resets the WAL, keep the file from staying large.
  db.pragma('journal_size_limit = 67108864');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
}

function migrate(db: Db): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
  const rows = db.prepare('SELECT version, name FROM schema_migrations').all() as { version: number; name: string }[];
  const applied = new Set(rows.map((r) => r.version));
  const known = Math.max(0, ...MIGRATIONS.map((m) => m.version));
  const newest = Math.max(0, ...applied);
  if (newest > known) {
    throw new Error(`database schema version ${newest} is newer than this build knows (${known}); upgrade paypolicy`);
  }
  assertSameMigrations(rows, MIGRATIONS);
  for (const m of MIGRATIONS) {
    if (applied.has(m.version)) continue;
    writeTxn(db, () => {
      db.exec(m.sqlite);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
    });
  }
}

/**
 * Runs `fn` in one BEGIN IMMEDIATE transaction. `fn` must be synchronous: nothing may await while
 * the write lock is held, which is what keeps every write serialized.
 */
export function writeTxn<T>(db: Db, fn: () => T): T {
  // Inside another transaction this is a savepoint: durability is the outer commit's business.
  if (db.inTransaction) return db.transaction(fn)();
  assertWritable(db);
  db.pragma('synchronous = FULL');
  try {
    return db.transaction(fn).immediate();
  } catch (err) {
    if (isIoError(err)) failStop(db, err);
    throw storageFullOr(err);
  } finally {
    if (db.open) db.pragma('synchronous = NORMAL');
  }
}

/**
 * Fail-stop. After a failed sync (or any I/O error under a commit) what is on disk is unknown:
 * Linux may already have dropped the unsynced pages while the page cache still shows them. From
 * the first such error on, the database refuses every write and the owner is told once (it stops
 * answering and exits); nothing read from that state is ever acknowledged.
 */
const failures = new WeakMap<Db, Error>();
const failureListeners = new WeakMap<Db, Array<(err: Error) => void>>();

export function failStop(db: Db, err: unknown): void {
  if (failures.has(db)) return;
  const e = err instanceof Error ? err : new Error(String(err));
  failures.set(db, e);
  for (const listener of failureListeners.get(db) ?? []) listener(e);
}

/** The error that stopped this database, if any. */
export function storageFailure(db: Db): Error | undefined {
  return failures.get(db);
}

export function onStorageFailure(db: Db, listener: (err: Error) => void): void {
  failureListeners.set(db, [...(failureListeners.get(db) ?? []), listener]);
}

/** Throws once the database has been stopped by a failed sync. */
export function assertWritable(db: Db): void {
  const failure = failures.get(db);
  if (failure) throw new Error(`storage failed earlier (${failure.message}); writes are refused until restart`, { cause: failure });
}

/**
 * A commit refused because the disk (or the database's size limit) is full, SQLITE_FULL (ENOSPC
 * on a write) becomes 503 `storage_full` with Retry-After: the transaction rolled back whole, so
 * the caller may retry the same request once space is back. Anything else is returned as it is.
 */
export function storageFullOr(err: unknown): unknown {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (code !== 'SQLITE_FULL') return err;
  return new DomainError('overloaded', 'Storage full; nothing was written, retry shortly', { code: 'storage_full', cause: err });
}

/** SQLite's I/O errors (a failed write, read or fsync under a commit), e.g. SQLITE_IOERR_FSYNC. */
export function isIoError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_IOERR');
}
