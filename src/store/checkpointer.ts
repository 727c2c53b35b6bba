import { existsSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

export type Checkpointer = { close(): Promise<void> };

/** The compiled worker sits next to this module in dist/; under vitest, src/ has only the .ts. */
function workerUrl(): URL {
  const here = new URL('./checkpointWorker.js', import.meta.url);
  if (existsSync(here)) return here;
  const built = new URL('../../dist/src/store/checkpointWorker.js', import.meta.url);
  if (existsSync(built)) return built;
  throw new Error('checkpoint worker not built; run `npm run build`');
}

/** Starts the background checkpointer for a database whose own auto-checkpoint is turned off. */
export function startCheckpointer(file: string, intervalMs = 250): Checkpointer {
  const worker = new Worker(workerUrl(), { workerData: { file, intervalMs } });
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
