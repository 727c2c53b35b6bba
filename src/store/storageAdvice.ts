import { statfsSync } from 'node:fs';

/** Less free space than this counts as a full disk in start-up messages. */
const NEARLY_FULL_BYTES = 1 << 20;

function diskFull(dir: string): boolean {
  try {
    const s = statfsSync(dir);
    return s.bavail * s.bsize < NEARLY_FULL_BYTES;
  } catch {
    return false;
  }
}

/**
 * What an operator should do about a SQLite error met while locking or opening the data directory
 * at start. SQLite reports a full disk as SQLITE_FULL only on some paths (growing the -shm file
 * fails as an I/O error), so the file system's free space is asked as well.
 */
export function storageAdvice(code: string, dir: string): string {
  if (code === 'SQLITE_FULL' || diskFull(dir)) return 'the disk holding it is full: free some space and start again';
  if (code === 'SQLITE_IOERR_SHMSIZE') return 'its shared-memory file could not grow: the disk holding it may be full; free some space and start again';
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'another process holds it (a backup, a second paypolicy?): stop it and start again';
  if (code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_CANTOPEN') || code === 'SQLITE_PERM' || code === 'SQLITE_AUTH') {
    return 'the directory and its files must be writable by this user, on a file system mounted read-write';
  }
  return 'check the disk (the system log shows I/O errors) and start again';
}
