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
 * its writes for a 'catchUp', answered 'caughtUp'.
 *
 * It ends only on a message, between checkpoints: 'close' runs a last checkpoint first, 'stop'
 * (after a storage failure) does not. Either way the connection is closed and 'closed' posted, and
 * the thread is idle when the main thread terminates it. Terminated inside a checkpoint that then
 * fails (which is what checkpoints do once the storage has failed), better-sqlite3 would raise the
 * error on an isolate being torn down and abort the whole process.
 */
const { file, intervalMs, restartFrames, paused } = workerData as { file: string; intervalMs: number; restartFrames: number; paused: Int32Array };
const db = new Database(file);
const BUSY_TIMEOUT_MS = 1000;
db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const restart = db.prepare('PRAGMA wal_checkpoint(RESTART)');
const post = (msg: CheckpointerMessage) => parentPort!.postMessage(msg);
/** How long a catch-up waits between two checkpoints that could not take every frame. */
const CATCH_UP_RETRY_MS = 5;

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

const complete = (r: ReturnType<typeof round>): boolean => r !== undefined && r.busy === 0 && r.log === r.checkpointed;
const nap = new Int32Array(new SharedArrayBuffer(4));

/**
 * Starts the WAL over now, if every frame is in the database file and no reader still reads from
 * the WAL; never waits. Why here and not at the writer's next commit, where SQLite does it on its
 * own: a reader that began before the frames were all copied still holds a WAL read lock, and
 * readers that overlap one another always leave one; new readers read from the database file
 * alone, so a few tries while the writes are held back find the older ones gone.
 *
 * RESTART takes the write lock, so it is tried only while the main thread says its writes are
 * held back (`paused`, shared memory): then there is nothing left to copy and the lock is held for
 * a moment. A main thread that stopped waiting meanwhile would otherwise find its next BEGIN
 * blocked behind a checkpoint copying its new frames and syncing the database file.
 */
function restartNow(): boolean {
  if (Atomics.load(paused, 0) !== 1) return false;
  db.pragma('busy_timeout = 0');
  try {
    const r = restart.get() as { busy: number; log: number; checkpointed: number };
    return r.busy === 0 && r.log === r.checkpointed;
  } catch {
    return false;
  } finally {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }
}

/**
 * Checkpoints until every frame is in the database file and the WAL is started over, retrying for
 * up to `retryMs`: a reader (another process's, say) that began before the writes stopped keeps the
 * frames it may still read out of reach, and its WAL read lock keeps the WAL from starting over.
 * The window starts again once every frame is copied. Why: readers that began during that copy
 * (its database sync can take hundreds of ms on a slow disk) hold WAL read locks too, and only from
 * then on do new readers read the database file alone; timed from the start, the window could end
 * inside the copy, and against overlapping readers every catch-up would fail.
 */
function catchUp(retryMs: number): boolean {
  let deadline = performance.now() + retryMs;
  let copied = false;
  for (;;) {
    const done = complete(round());
    if (done && !copied) {
      copied = true;
      deadline = performance.now() + retryMs;
    }
    if (done && restartNow()) return true;
    if (Atomics.load(paused, 0) !== 1 || performance.now() + CATCH_UP_RETRY_MS >= deadline) return false;
    Atomics.wait(nap, 0, 0, CATCH_UP_RETRY_MS);
  }
}

parentPort!.on('message', (msg: CheckpointerRequest) => {
  if (msg.type === 'catchUp') {
    post({ type: 'caughtUp', id: msg.id, restarted: catchUp(msg.retryMs) });
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
