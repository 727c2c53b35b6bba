import { scryptSync } from 'node:crypto';
import { parentPort, threadId } from 'node:worker_threads';
import type { PasswordHashRequest, PasswordHashResponse } from './passwordHasher.js';

/**
 * The password-hashing thread. scryptSync runs on this thread itself, never on libuv's shared
 * thread pool, so a burst of sign-ins cannot delay the WAL fsync that every payment waits for.
 * One job at a time: the hasher in the main thread keeps the queue and its bound.
 */
parentPort!.on('message', (job: PasswordHashRequest) => {
  let reply: PasswordHashResponse;
  try {
    const key = scryptSync(job.password, job.salt, job.keyLength, { N: job.N, r: job.r, p: job.p, maxmem: 256 * job.N * job.r * job.p });
    reply = { id: job.id, threadId, ok: true, key };
  } catch (err) {
    reply = { id: job.id, threadId, ok: false, error: err instanceof Error ? err.message : String(err) };
  }
  parentPort!.postMessage(reply);
});
