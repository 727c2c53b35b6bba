import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { CheckpointerMessage, CheckpointerRequest } from './checkpointer.js';

/**
 * Background WAL checkpointer: its own connection copies committed WAL frames into the database
 * file (and syncs both) so the writer's commits never stop for a checkpoint. PASSIVE never waits
 * for or blocks the writer; frames it cannot copy yet are taken on the next round.
 *
 * A round that finds the WAL at `restartFrames` frames or more says so ('long'): under writes that
 * never pause, SQLite never starts the WAL over (checkpointer.ts), and the main thread then pauses
 * its writes for a 'catchUp' round, answered 'caughtUp'.
 *
 * It ends only on a message, between checkpoints: 'close' runs a last checkpoint first, 'stop'
 * (after a storage failure) does not. Either way the connection is closed and 'closed' posted, and
 * the thread is idle when the main thread terminates it. Terminated inside a checkpoint that then
 * fails (which is what checkpoints do once the storage has failed), better-sqlite3 would raise the
 * error on an isolate being torn down and abort the whole process.
 */
const { file, intervalMs, restartFrames } = workerData as { file: string; intervalMs: number; restartFrames: number };
const db = new Database(file);
db.pragma('busy_timeout = 1000');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const post = (msg: CheckpointerMessage) => parentPort!.postMessage(msg);

/** One PASSIVE checkpoint: the WAL's frames and how many of them are now in the database file. */
function round(): { busy: number; log: number; checkpointed: number } | undefined {
  try {
    return checkpoint.get() as { busy: number; log: number; checkpointed: number };
  } catch {
    // A busy database simply waits for the next round.
    return undefined;
  }
}

const timer = setInterval(() => {
  const r = round();
  if (r && r.log >= restartFrames) post({ type: 'long', frames: r.log });
}, intervalMs);

parentPort!.on('message', (msg: CheckpointerRequest) => {
  if (msg.type === 'catchUp') {
    const r = round();
    post({ type: 'caughtUp', id: msg.id, complete: r !== undefined && r.busy === 0 && r.log === r.checkpointed });
    return;
  }
  clearInterval(timer);
  try {
    if (msg.type === 'close') checkpoint.run();
  } finally {
    db.close();
    post({ type: 'closed' });
  }
});
