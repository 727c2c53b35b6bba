import { chmodSync, closeSync, fchmodSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, realpathSync, statSync, watch, writeSync, type FSWatcher } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { storageAdvice } from './storageAdvice.js';

/**
 * Makes sure the data directory is private before anything is read from or written to it. It is
 * created 0700 when missing. An existing directory that group or others can enter or read is
 * refused, not silently fixed: the operator may have shared it on purpose and should decide. Any
 * other regular file inside with group or other bits (from an older version or a copy) is narrowed
 * to 0600 and the caller warns with the returned names; master.key is left for loadMasterKey to
 * refuse, since a key others could read may already be known. Files the service creates later are 0600 by
 * construction (masterKey.ts, bootstrap.ts, db.ts), whatever the umask.
 */
export function prepareDataDir(dir: string): { narrowed: string[] } {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = statSync(dir);
  if (!stat.isDirectory()) throw new Error(`data directory ${dir} is not a directory`);
  const mode = stat.mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new Error(`data directory ${dir} is accessible by group or others (mode ${mode.toString(8)}); run: chmod 700 ${dir}`);
  }
  const narrowed: string[] = [];
  for (const name of readdirSync(dir)) {
    const file = join(dir, name);
    const entry = lstatSync(file);
    if (!entry.isFile() || (entry.mode & 0o077) === 0 || name === 'master.key') continue;
    chmodSync(file, 0o600);
    narrowed.push(name);
  }
  return { narrowed };
}

/** fsync of a directory: makes the names of files just created in it survive a power cut. */
export function syncDirectory(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes a file of the data directory: mode 0600 whatever the umask, synced, and its name synced
 * into the directory, so a power cut leaves either no file or the whole of it. `wx` fails with
 * EEXIST when the file exists.
 */
export function writePrivateFile(file: string, text: string, flag: 'w' | 'wx' = 'w'): void {
  const fd = openSync(file, flag, 0o600);
  try {
    fchmodSync(fd, 0o600);
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  syncDirectory(dirname(file));
}

/** The lock file of a data directory: an empty file, locked through SQLite (see lockDataDir). */
export const LOCK_FILE = 'paypolicy.lock';

export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
  constructor(dir: string) {
    super(`data directory ${dir} is in use by another paypolicy process (it holds the lock on ${join(dir, LOCK_FILE)}); stop that process first, or give this one its own --data-dir`);
  }
}

/** Holds a data directory for this process until release() (or until the process ends, however it ends). */
export type DataDirLock = { release(): void };

/**
 * Takes the data directory for this process alone, so two servers never write one database.
 * Node has no flock, so the lock is SQLite's own: a connection to the lock file opens an exclusive
 * transaction and keeps it open, which holds an exclusive POSIX lock on the file. Nothing is ever
 * written to it (it stays empty; a -journal appears beside it while held). The kernel drops the
 * lock when the process ends, kill -9 included, so a dead server never leaves a stale lock and
 * there is no pid to check. A second process gets SQLITE_BUSY at once (no busy wait) and is
 * refused with DataDirInUseError; so is a second start in the same process, from the set below,
 * before it touches the file: POSIX locks belong to the process, and closing any descriptor of
 * the file in it would drop the lock. The file itself stays: deleting it on release would let two
 * later starts lock two different files of the same name. The database itself keeps normal
 * locking, so WAL readers and the checkpoint thread work as before.
 */
export function lockDataDir(dir: string): DataDirLock {
  const file = join(dir, LOCK_FILE);
  const key = realpathSync(dir);
  if (heldHere.has(key)) throw new DataDirInUseError(dir);
  const held = [takeLockFile(dir, file)];
  heldHere.add(key);
  // The lock is on the file, not the name: a lock file deleted or replaced while this process runs
  // would let the next start lock a new file and open the same database. So whatever file bears
  // the name is locked again at once (inotify), and checked every second in case an event is missed.
  // The watch is on the lock file itself, not the directory: every WAL write is an event in the
  // directory (~900 a second under load), while the file's own inode reports exactly its unlink
  // or a rename over it (its link count drops) and its own move.
  let locked = statSync(file);
  let watcher: FSWatcher | undefined;
  const watchLockFile = () => {
    watcher?.close();
    try {
      const w = watch(file, { persistent: false }, () => relock());
      w.on('error', () => w.close());
      watcher = w;
    } catch {
      watcher = undefined; // gone again already: the next check relocks and watches again
    }
  };
  const relock = () => {
    let now;
    try {
      now = statSync(file);
    } catch {
      now = undefined;
    }
    if (now && now.ino === locked.ino && now.dev === locked.dev) return;
    try {
      held.push(takeLockFile(dir, file));
      locked = statSync(file);
      watchLockFile();
    } catch {
      // Another process locked the new file first; nothing more can be done from here.
    }
  };
  watchLockFile();
  const timer = setInterval(relock, 1000).unref();
  return {
    release() {
      if (!heldHere.has(key)) return;
      clearInterval(timer);
      watcher?.close();
      for (const db of held) db.close();
      heldHere.delete(key);
    },
  };
}

/** Creates the lock file when missing and locks it: an open EXCLUSIVE transaction (see lockDataDir). */
function takeLockFile(dir: string, file: string): Database.Database {
  try {
    // Created 0600 whatever the umask, like every other file of the data directory.
    closeSync(openSync(file, 'wx', 0o600));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const db = new Database(file, { timeout: 0 });
  try {
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    db.close();
    const code = (err as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY') throw new DataDirInUseError(dir);
    throw new Error(`cannot lock data directory ${dir} through ${file} (${String(code)}: ${(err as Error).message}); ${lockAdvice(code, dir)}`, { cause: err });
  }
  return db;
}

/**
 * What the operator should do when the lock file cannot be locked. Deleting it is the answer only
 * when the file itself is bad; on a full or read-only disk it would only lose the lock's safety.
 */
function lockAdvice(code: unknown, dir: string): string {
  if (code === 'SQLITE_NOTADB' || (typeof code === 'string' && code.startsWith('SQLITE_CORRUPT'))) {
    return 'the file is not a lock file paypolicy made; if no paypolicy process uses the directory, delete that file';
  }
  return storageAdvice(typeof code === 'string' ? code : 'unknown', dir);
}

/** Data directories (real paths) this process holds. */
const heldHere = new Set<string>();
