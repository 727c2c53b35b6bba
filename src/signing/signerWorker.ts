import { parentPort } from 'node:worker_threads';
import { loadSigningKey, runSignJob, type SigningKey } from './signJob.js';
import type { WorkerRequest, WorkerResponse } from './signJobs.js';

/**
 * Signing thread: holds the keys the main thread hands it and answers batches of jobs, so
 * hashing and ECDSA never run on the event loop that serves requests.
 */
const keys = new Map<string, SigningKey>();

parentPort!.on('message', (msg: WorkerRequest) => {
  if (msg.type === 'key') {
    keys.set(msg.orgId, loadSigningKey(msg.privateKey));
    return;
  }
  const results: WorkerResponse['results'] = msg.jobs.map(({ id, job }) => {
    try {
      const key = keys.get(job.orgId);
      if (!key) throw new Error('no key loaded for organization');
      return { id, ok: true as const, output: runSignJob(key, job) };
    } catch (err) {
      return { id, ok: false as const, error: (err as Error).message };
    }
  });
  parentPort!.postMessage({ type: 'results', results } satisfies WorkerResponse);
});
