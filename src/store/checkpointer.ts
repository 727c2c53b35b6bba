import { Worker } from 'node:worker_threads';
import { workerUrl } from '../workerUrl.js';

export type Checkpointer = { close(): Promise<void> };

/** Starts the background checkpointer for a database whose own auto-checkpoint is turned off. */
export function startCheckpointer(file: string, intervalMs = 250): Checkpointer {
  const worker = new Worker(workerUrl('checkpointWorker.js', import.meta.url, 'store'), { workerData: { file, intervalMs } });
  worker.unref();
  return {
    close() {
      return new Promise<void>((resolve) => {
        const done = () => resolve();
        worker.once('message', () => void worker.terminate().then(done));
        worker.once('exit', done);
        worker.postMessage('close');
      });
    },
  };
}
