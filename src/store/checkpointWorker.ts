import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/**
 * Background WAL checkpointer: its own connection copies committed WAL frames into the database
 * file (and syncs both) so the writer's commits never stop for a checkpoint. PASSIVE never waits
 * for or blocks the writer; frames it cannot copy yet are taken on the next round.
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

parentPort!.on('message', (msg: string) => {
  if (msg !== 'close') return;
  clearInterval(timer);
  try {
    checkpoint.run();
  } finally {
    db.close();
    parentPort!.postMessage('closed');
  }
});
