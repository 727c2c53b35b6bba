import { startWorker } from '../workerUrl.js';

export type Checkpointer = { close(opts?: { checkpoint?: boolean }): Promise<void> };

/**
 * How long a stop without a last checkpoint waits for the thread to finish the checkpoint it is in
 * (a sync on a failing disk can hang) before terminating it anyway.
 */
const STOP_WAIT_MS = 5_000;

/**
 * Starts the background checkpointer for a database whose own auto-checkpoint is turned off.
 * `onFailure` runs if the thread dies, so the caller can turn SQLite's own checkpoints back on
 * rather than let the WAL grow without bound.
 *
 * `close` asks the thread to finish (with a last checkpoint unless `checkpoint: false`) and
 * terminates it once it has answered, never in the middle of a checkpoint (checkpointWorker.ts).
 * Closing twice returns the first close.
 */
export function startCheckpointer(file: string, onFailure: (err: unknown) => void, intervalMs = 250): Checkpointer {
  const worker = startWorker('checkpointWorker.js', import.meta.url, 'store', { workerData: { file, intervalMs } });
  worker.unref();
  let closing: Promise<void> | undefined;
  let exited = false;
  worker.on('error', (err) => onFailure(err));
  worker.on('exit', (code) => {
    exited = true;
    if (!closing) onFailure(new Error(`checkpoint thread exited with code ${code}`));
  });
  return {
    close({ checkpoint = true } = {}) {
      closing ??= exited ? Promise.resolve() : new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(stuck);
          resolve();
        };
        const stuck = checkpoint ? undefined : setTimeout(() => void worker.terminate().then(done), STOP_WAIT_MS);
        stuck?.unref();
        worker.once('message', () => void worker.terminate().then(done));
        worker.once('exit', done);
        worker.postMessage(checkpoint ? 'close' : 'stop');
      });
      return closing;
    },
  };
}
