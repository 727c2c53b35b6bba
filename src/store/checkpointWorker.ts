import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/**
 * Background WAL checkpointer: its own connection copies committed WAL frames into the database
 * file (and syncs both) so the writer's commits never stop for a checkpoint. PASSIVE never waits
 * for or blocks the writer; frames it cannot copy yet are taken on the next round.
 *
 * It ends only on a message, between checkpoints: 'close' runs a last checkpoint first, 'stop'
 * (after a storage failure) does not. Either way the connection is closed and 'closed' posted, and
 * the thread is idle when the main thread terminates it. Terminated inside a checkpoint that then
 * fails (which is what checkpoints do once the storage has failed), better-sqlite3 would raise the
 * error on an isolate being torn down and abort the whole process.
 */
const { file, intervalMs } = workerData as { file: string; intervalMs: number };
const db = new Database(file);
db.pragma('busy_timeout = 1000');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

const timer = setInterval(() => {
  try {
    checkpoint.run();
  } catch {
    // A busy database simply waits for the next round.
  }
}, intervalMs);

parentPort!.on('message', (msg: 'close' | 'stop') => {
  clearInterval(timer);
  try {
    if (msg === 'close') checkpoint.run();
  } finally {
    db.close();
    parentPort!.postMessage('closed');
  }
});
