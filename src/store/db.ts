import Database from 'better-sqlite3';
import { MIGRATIONS } from './migrations/index.js';

export type Db = Database.Database;

/**
 * Opens the database file with the settings every writer relies on: WAL so reads never block the
 * writer, and foreign keys on. Commits are made durable in one of two ways, both before any answer
 * that depends on them is sent: writeTxn commits with synchronous=FULL (SQLite syncs the WAL
 * itself); the group-commit queue commits with NORMAL and syncs the WAL off the event loop
 * (walSync.ts). Applies pending migrations forward, each in its own transaction.
 */
export function openDatabase(file: string): Db {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // Checkpoints run on a background connection (checkpointer.ts), never inside a commit here.
  db.pragma('wal_autocheckpoint = 0');
  // After a checkpoint resets the WAL, keep the file from staying large.
  db.pragma('journal_size_limit = 67108864');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  migrate(db);
  return db;
}

function migrate(db: Db): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
  const applied = new Set(
    (db.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map((r) => r.version),
  );
  const known = Math.max(0, ...MIGRATIONS.map((m) => m.version));
  const newest = Math.max(0, ...applied);
  if (newest > known) {
    throw new Error(`database schema version ${newest} is newer than this build knows (${known}); upgrade paypolicy`);
  }
  for (const m of MIGRATIONS) {
    if (applied.has(m.version)) continue;
    writeTxn(db, () => {
      db.exec(m.sql);
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
  db.pragma('synchronous = FULL');
  try {
    return db.transaction(fn).immediate();
  } finally {
    db.pragma('synchronous = NORMAL');
  }
}
