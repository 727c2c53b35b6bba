import { parentPort } from 'node:worker_threads';
import { loadSigningKey, runSignJob, type SigningKey } from './signJob.js';
import type { WorkerRequest, WorkerResponse } from './signJobs.js';

/**
 * Signing thread: holds the keys the main thread hands it and answers batches of jobs, so
 * hashing and ECDSA never run on the event loop that serves requests.
 */
const keys = new Map<string, SigningKey>();

/**
 * Results go back every this many jobs rather than once per batch. Why: a batch of 40 jobs is ~8
 * ms of signing, and answering it whole left the event loop idle meanwhile and then handed it 40
 * payments at once (a convoy: the p50 was most of a batch's time). Measured with BENCH_ONLY=sign:
 * 1,837 req/s answering whole batches, 2,083 with chunks of 4, 2,031 with every job alone (more
 * messages for the main thread to receive).
 */
export const RESULT_CHUNK = 4;

parentPort!.on('message', (msg: WorkerRequest) => {
  if (msg.type === 'key') {
    keys.set(msg.orgId, loadSigningKey(msg.privateKey));
    return;
  }
  if (msg.type === 'stop') {
    // Between jobs, never inside the addon. The results posted above still reach the main thread
    // before its 'exit' event; with the port closed the event loop is empty and the thread ends.
    keys.clear();
    parentPort!.close();
    return;
  }
  let results: WorkerResponse['results'] = [];
  for (const { id, job } of msg.jobs) {
    try {
      const key = keys.get(job.orgId);
      if (!key) throw new Error('no key loaded for organization');
      results.push({ id, ok: true, output: runSignJob(key, job) });
    } catch (err) {
      results.push({ id, ok: false, error: (err as Error).message });
    }
    if (results.length === RESULT_CHUNK) {
      parentPort!.postMessage({ type: 'results', results } satisfies WorkerResponse);
      results = [];
    }
  }
  if (results.length > 0) parentPort!.postMessage({ type: 'results', results } satisfies WorkerResponse);
});
