import { startWorker } from '../singleExecutable/workerFiles.js';

/** What the main thread asks the checkpoint thread (checkpointWorker.ts). */
export type CheckpointerRequest = { type: 'catchUp'; id: number; retryMs: number } | { type: 'close' } | { type: 'stop' };
/** What the checkpoint thread tells the main thread. */
export type CheckpointerMessage = { type: 'long'; frames: number } | { type: 'caughtUp'; id: number; restarted: boolean } | { type: 'closed' };

export type Checkpointer = {
  /**
   * For a caller that holds every write back until it resolves: checkpoints now, and again for up
   * to `retryMs` while frames are left or readers still read from the WAL, and starts the WAL over.
   * Resolves true when it did; false when it could not, when the thread is gone, or after `waitMs`
   * without an answer (one checkpoint's database sync can be slow).
   */
  catchUp(limits: { retryMs: number; waitMs: number }): Promise<boolean>;
  close(opts?: { checkpoint?: boolean }): Promise<void>;
};

export type CheckpointerOptions = {
  /** How often the thread checkpoints (PASSIVE). */
  intervalMs?: number;
  /** A WAL of this many frames or more is reported to `onLong` after each checkpoint that finds it. */
  restartFrames?: number;
  onLong?: (frames: number) => void;
};

/**
 * How long a stop without a last checkpoint waits for the thread to finish the checkpoint it is in
 * (a sync on a failing disk can hang) before terminating it anyway.
 */
const STOP_WAIT_MS = 5_000;

/** WAL frames (one 4 KiB page each) in a MiB. */
export const FRAMES_PER_MB = 256;

/**
 * The WAL size (frames) past which the writes are paused for a catch-up (--wal-restart-mb). Below
 * the 64 MiB journal_size_limit (db.ts), so a WAL that is started over keeps its file and is
 * written over in place: no growth, and no truncation to grow back from.
 */
export const WAL_RESTART_FRAMES = 32 * FRAMES_PER_MB;

/**
 * Starts the background checkpointer for a database whose own auto-checkpoint is turned off.
 * `onFailure` runs if the thread dies, so the caller can turn SQLite's own checkpoints back on
 * rather than let the WAL grow without bound.
 *
 * Why `onLong`: SQLite starts the WAL over only when a write transaction begins with every frame
 * already checkpointed. Under writes that never pause (each group commit starts as the last one
 * ends) that moment never comes, however often the thread checkpoints: measured on the bench, the
 * WAL file grew by 52–65 MB a second, without bound, until the disk was full. The owner is told
 * when the WAL has grown past `restartFrames`, and can hold writes back for a `catchUp`.
 *
 * `close` asks the thread to finish (with a last checkpoint unless `checkpoint: false`) and
 * terminates it once it has answered, never in the middle of a checkpoint (checkpointWorker.ts).
 * Closing twice returns the first close.
 */
export function startCheckpointer(file: string, onFailure: (err: unknown) => void, options: CheckpointerOptions = {}): Checkpointer {
  const { intervalMs = 250, restartFrames = WAL_RESTART_FRAMES, onLong } = options;
  // 1 while a catch-up holds the writes back (checkpointWorker.ts restartNow), else 0.
  const paused = new Int32Array(new SharedArrayBuffer(4));
  const worker = startWorker('checkpointWorker.js', import.meta.url, 'store', { workerData: { file, intervalMs, restartFrames, paused } });
  worker.unref();
  let closing: Promise<void> | undefined;
  let exited = false;
  // Catch-ups waiting for their answer, by id: an answer that comes after its wait ended is dropped.
  const caughtUp = new Map<number, (restarted: boolean) => void>();
  let nextId = 1;
  let closed: (() => void) | undefined;
  worker.on('message', (msg: CheckpointerMessage) => {
    if (msg.type === 'long') onLong?.(msg.frames);
    else if (msg.type === 'caughtUp') caughtUp.get(msg.id)?.(msg.restarted);
    else closed?.();
  });
  worker.on('error', (err) => onFailure(err));
  worker.on('exit', (code) => {
    exited = true;
    for (const answer of [...caughtUp.values()]) answer(false);
    if (!closing) onFailure(new Error(`checkpoint thread exited with code ${code}`));
  });
  return {
    catchUp({ retryMs, waitMs }) {
      if (exited || closing) return Promise.resolve(false);
      const id = nextId++;
      return new Promise<boolean>((resolve) => {
        const answer = (restarted: boolean) => {
          Atomics.store(paused, 0, 0);
          clearTimeout(timer);
          caughtUp.delete(id);
          resolve(restarted);
        };
        // Why a caller's wait can end before the answer: it holds writes back meanwhile. Writes
        // that resume do not wait on the thread: its PASSIVE checkpoints never take the write
        // lock, and it tries the RESTART only while `paused` is still 1, when there is nothing to
        // copy (at worst a BEGIN that lands just then waits out that brief lock).
        const timer = setTimeout(answer, waitMs, false);
        caughtUp.set(id, answer);
        Atomics.store(paused, 0, 1);
        worker.postMessage({ type: 'catchUp', id, retryMs } satisfies CheckpointerRequest);
      });
    },
    close({ checkpoint = true } = {}) {
      closing ??= exited ? Promise.resolve() : new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(stuck);
          resolve();
        };
        const stuck = checkpoint ? undefined : setTimeout(() => void worker.terminate().then(done), STOP_WAIT_MS);
        stuck?.unref();
        closed = () => void worker.terminate().then(done);
        worker.once('exit', done);
        worker.postMessage({ type: checkpoint ? 'close' : 'stop' } satisfies CheckpointerRequest);
      });
      return closing;
    },
  };
}
