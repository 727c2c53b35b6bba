import { Worker } from 'node:worker_threads';
import type { Hex } from 'viem';
import type { SignJob, SignOutput, WorkerRequest, WorkerResponse } from './signJobs.js';
import { startWorker } from '../singleExecutable/workerFiles.js';
import { createGate, DEFAULT_MAX_QUEUE_MS, DEFAULT_MAX_SIGN_QUEUE, tenantShare } from '../overload/admission.js';

type Pending = { resolve: (o: SignOutput) => void; reject: (e: Error) => void };
type Slot = {
  worker: Worker; keys: Set<string>; pending: Map<number, Pending>; queue: Array<{ id: number; job: SignJob }>;
  /** True from the thread's 'online' event until it exits. */
  online: boolean;
  /** Resolves when the thread has exited, for whatever reason. */
  exited: Promise<void>;
};

/**
 * How long close() waits for a signing thread to answer what it was given and end on its own
 * before terminating it. A batch is at most the signing stage's bound (256 jobs, ~40 ms).
 */
export const STOP_WAIT_MS = 10_000;

/** One signing thread as health checks and metrics see it (read-only). */
export type SignerThread = {
  /** The running thread (a replacement once the first died). */
  worker: Worker;
  /** Started and not exited; a replacement is false until its own 'online' event. */
  online: boolean;
  /** Times this slot's thread died and was replaced. */
  restarts: number;
  /** Jobs sent to it and not yet answered (0 = idle). */
  jobs: number;
  /** Exit code of the last thread that died in this slot, if any. */
  lastExitCode: number | undefined;
};

export type SignerPool = {
  sign: (job: SignJob) => Promise<SignOutput>;
  /**
   * Admits one payment of `orgId` into the signing stage (pre-sign, reservation commit, signing
   * thread, settling commit) and returns its release; throws `overloaded` when `maxQueue` payments
   * are already in it, or when the organization holds its share (`maxQueuePerOrg`, by default
   * three quarters: overload/admission.ts tenantShare), so one tenant's payments stuck on a slow commit or
   * its own flood leave room for the others. Sign calls it before anything is signed or written,
   * so a refusal leaves no trace.
   */
  admit: (orgId: string) => () => void;
  /**
   * How long (ms) an admitted payment may wait for a signing thread and its turn in the write
   * queue: one that waited longer is refused (`overloaded`) before its decision is written.
   */
  maxQueueMs: number;
  /** Read-only view of each thread, for /readyz and /metrics; cheap (no message to the threads). */
  threads: () => SignerThread[];
  /** Payments in the signing stage right now (what `admit` bounds) and the bound. */
  stage: () => { inFlight: number; limit: number };
  /**
   * Stops every thread: jobs already handed to a thread are signed and answered, the rest (and
   * every later sign) are refused with 'signer pool closed'. Resolves once the threads have exited.
   */
  close: () => Promise<void>;
};

/**
 * A fixed set of signing threads. Jobs queued in the same tick go to a thread as one batch, which
 * keeps message overhead low under load; keys are sent to a thread once, on first use.
 */
export function createSignerPool(
  size: number, privateKeyOf: (orgId: string) => Hex, maxQueue = DEFAULT_MAX_SIGN_QUEUE, maxQueueMs = DEFAULT_MAX_QUEUE_MS, maxQueuePerOrg = tenantShare(maxQueue),
): SignerPool {
  const stage = createGate(maxQueue, 'too many payments being signed', maxQueuePerOrg);
  let nextId = 1;
  let turn = 0;
  let closed = false;
  let closing: Promise<void> | undefined;
  const slots: Slot[] = [];
  const restarts: number[] = [];
  const lastExit: Array<number | undefined> = [];

  function spawn(index: number): Slot {
    const worker = startWorker('signerWorker.js', import.meta.url, 'signing');
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const slot: Slot = { worker, keys: new Set(), pending: new Map(), queue: [], online: false, exited };
    worker.once('online', () => {
      if (slots[index] === slot) slot.online = true;
    });
    worker.on('message', (msg: WorkerResponse) => {
      for (const r of msg.results) {
        const p = slot.pending.get(r.id);
        if (!p) continue;
        slot.pending.delete(r.id);
        if (r.ok) p.resolve(r.output);
        else p.reject(new Error(`signing failed: ${r.error}`));
      }
    });
    const fail = (err: Error) => {
      slot.online = false;
      for (const p of slot.pending.values()) p.reject(err);
      slot.pending.clear();
      if (!closed && slots[index] === slot) {
        restarts[index] = (restarts[index] ?? 0) + 1;
        slots[index] = spawn(index);
      }
    };
    worker.on('error', fail);
    worker.on('exit', (code) => {
      lastExit[index] = code;
      if (!closed) fail(new Error(`signing thread exited with code ${code}`));
    });
    worker.unref();
    return slot;
  }

  for (let i = 0; i < Math.max(1, size); i++) slots.push(spawn(i));

  /**
   * Asks a thread to stop between two jobs rather than terminating it. Why: the threads call into
   * libsecp256k1's Node-API addon, built with C++ exceptions; terminated in the middle of a call,
   * the addon's next Node-API call fails, the error cannot be thrown into a terminating thread,
   * and its rethrow ends in std::terminate, which aborts the whole process (SIGABRT): `serve` did
   * so on SIGTERM in CI. test/faults/signerStop.test.ts closes pools mid-batch and checks the exit.
   */
  function stop(slot: Slot): Promise<void> {
    flush(slot);
    slot.worker.postMessage({ type: 'stop' } satisfies WorkerRequest);
    // Only a thread stuck past any batch's length is terminated. The timer is ref'd on purpose:
    // the threads are unref'd, and a process whose loop emptied meanwhile would exit, which
    // terminates them mid-call all the same.
    const stuck = setTimeout(() => void slot.worker.terminate(), STOP_WAIT_MS);
    return slot.exited.finally(() => clearTimeout(stuck));
  }

  function flush(slot: Slot): void {
    const jobs = slot.queue;
    slot.queue = [];
    if (jobs.length > 0) slot.worker.postMessage({ type: 'jobs', jobs } satisfies WorkerRequest);
  }

  return {
    sign(job) {
      if (closed) return Promise.reject(new Error('signer pool closed'));
      const slot = slots[turn++ % slots.length]!;
      if (!slot.keys.has(job.orgId)) {
        slot.worker.postMessage({ type: 'key', orgId: job.orgId, privateKey: privateKeyOf(job.orgId) } satisfies WorkerRequest);
        slot.keys.add(job.orgId);
      }
      const id = nextId++;
      return new Promise<SignOutput>((resolve, reject) => {
        slot.pending.set(id, { resolve, reject });
        if (slot.queue.push({ id, job }) === 1) setImmediate(() => flush(slot));
      });
    },
    admit: (orgId) => stage.enter(orgId),
    maxQueueMs,
    threads: () => slots.map((s, i) => ({ worker: s.worker, online: s.online, restarts: restarts[i] ?? 0, jobs: s.pending.size, lastExitCode: lastExit[i] })),
    stage: () => ({ inFlight: stage.inFlight(), limit: stage.limit }),
    close() {
      if (closing) return closing;
      closed = true;
      closing = Promise.all(slots.map(stop)).then(() => {
        for (const s of slots) for (const p of s.pending.values()) p.reject(new Error('signer pool closed'));
      });
      return closing;
    },
  };
}
