import Database from 'better-sqlite3';
import { MIGRATIONS } from './migrations/index.js';

export type Db = Database.Database;

/**
 * Opens the database file with the settings every writer relies on: WAL so reads never block the
 * writer, synchronous=FULL so a commit is on disk before any answer that depends on it is sent,
 * and foreign keys on. Applies pending migrations forward, each in its own transaction.
 */
export function openDatabase(file: string): Db {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
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
    db.transaction(() => {
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
    }).immediate();
  }
}

/**
 * Runs `fn` in one BEGIN IMMEDIATE transaction. `fn` must be synchronous: nothing may await while
 * the write lock is held, which is what keeps every write serialized.
 */
export function writeTxn<T>(db: Db, fn: () => T): T {
  return db.transaction(fn).immediate();
}
