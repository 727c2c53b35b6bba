import { spawn } from 'node:child_process';

/**
 * Another process reading the database without a break: two connections, each holding a read
 * transaction for 20 ms, the next one begun 10 ms before the last ends, so some reader always holds
 * a snapshot older than the newest commit (a monitor or a backup tool polling the file). Resolves
 * when it has read for `ms`.
 */
export function overlappingReaders(file: string, ms: number): Promise<void> {
  const script = `
    const Database = require('better-sqlite3');
    const nap = (t) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, t);
    const readers = [0, 1].map(() => new Database(process.env.DB, { readonly: true }));
    const read = (db) => { db.exec('BEGIN'); db.prepare('SELECT count(*) FROM settings').get(); };
    const end = Date.now() + Number(process.env.MS);
    let [older, newer] = readers;
    read(older);
    while (Date.now() < end) {
      nap(10);
      read(newer);
      nap(10);
      older.exec('COMMIT');
      [older, newer] = [newer, older];
    }
    older.exec('COMMIT');`;
  const child = spawn(process.execPath, ['-e', script], { cwd: process.cwd(), env: { ...process.env, DB: file, MS: String(ms) }, stdio: ['ignore', 'ignore', 'inherit'] });
  return new Promise((resolve, reject) => child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`reader process exited with ${code}`)))));
}
