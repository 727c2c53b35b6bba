import { startWorker } from '../workerUrl.js';

export type Checkpointer = { close(opts?: { checkpoint?: boolean }): Promise<void> };

/**
 * Starts the background checkpointer for a database whose own auto-checkpoint is turned off.
 * `onFailure` runs if the thread dies, so the caller can turn SQLite's own checkpoints back on
 * rather than let the WAL grow without bound.
 */
export function startCheckpointer(file: string, onFailure: (err: unknown) => void, intervalMs = 250): Checkpointer {
  const worker = startWorker('checkpointWorker.js', import.meta.url, 'store', { workerData: { file, intervalMs } });
  worker.unref();
  let closing = false;
  worker.on('error', (err) => onFailure(err));
  worker.on('exit', (code) => {
    if (!closing) onFailure(new Error(`checkpoint thread exited with code ${code}`));
  });
  return {
    close({ checkpoint = true } = {}) {
      closing = true;
      if (!checkpoint) return worker.terminate().then(() => undefined);
      return new Promise<void>((resolve) => {
        const done = () => resolve();
        worker.once('message', () => void worker.terminate().then(done));
        worker.once('exit', done);
        worker.postMessage('close');
      });
    },
  };
}
