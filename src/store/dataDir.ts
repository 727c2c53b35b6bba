import { chmodSync, closeSync, fchmodSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, statSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';

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
