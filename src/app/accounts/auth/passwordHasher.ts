import { Worker } from 'node:worker_threads';
import { startWorker } from '../../../singleExecutable/workerFiles.js';

/**
 * The one thread that runs scrypt for dashboard passwords, with a bounded queue for sign-ins.
 *
 * Why a thread of its own: node's async `crypto.scrypt` runs on libuv's thread pool (4 threads),
 * the same pool the WAL fdatasync uses before any signature leaves. 64 concurrent sign-ins kept
 * that pool busy for seconds and every payment waited behind them. Here scrypt runs synchronously
 * inside one worker thread, so at most one core is ever spent on password hashing and the libuv
 * pool never sees it.
 *
 * Why a bound: sign-ins are unauthenticated. At most MAX_WAITING_SIGN_INS of them may wait for or
 * occupy the thread; beyond that `hashForSignIn` refuses at once (PasswordHasherBusyError) instead
 * of queueing without limit. Hashes for account changes come from signed-in operators and owners
 * and wait in the same line: the operator's are never refused, but one organization's owners may
 * have at most MAX_ACCOUNT_HASHES_PER_ORG waiting or running, so that an owner resetting passwords
 * in a loop cannot make every organization's sign-ins wait behind an endless line.
 *
 * The thread is started on first use and shared by the whole process (it is a process resource,
 * like the libuv pool it replaces). It holds the process open only while jobs are pending, and it
 * stops once it has had nothing to do for PASSWORD_THREAD_IDLE_MS: a thread is a V8 heap of its
 * own (about 6 MB resident), and sign-ins are rare next to payments. The next hash starts a new
 * one, which adds tens of milliseconds to a hash that takes 50-100 ms anyway.
 */

/** Sign-ins that may be waiting for or running on the hashing thread at once; more are refused. */
export const MAX_WAITING_SIGN_INS = 8;

/** Account-change hashes one organization may have waiting for or running on the thread; more are refused. */
export const MAX_ACCOUNT_HASHES_PER_ORG = 2;

/** How long the hashing thread stays up with no job before it stops (the next job starts it again). */
export const PASSWORD_THREAD_IDLE_MS = 10_000;

export type ScryptParams = { N: number; r: number; p: number };

/** Message to the worker. */
export type PasswordHashRequest = ScryptParams & { id: number; password: string; salt: Uint8Array; keyLength: number };
/** Message from the worker; `threadId` is the worker's, so callers can see where the hash ran. */
export type PasswordHashResponse = { id: number; threadId: number; ok: true; key: Uint8Array } | { id: number; threadId: number; ok: false; error: string };

/**
 * Thrown by `hashForSignIn` when MAX_WAITING_SIGN_INS sign-ins are already waiting, and by
 * `hashForAccount` when the organization already has MAX_ACCOUNT_HASHES_PER_ORG in the line.
 */
export class PasswordHasherBusyError extends Error {
  override name = 'PasswordHasherBusyError';
  constructor() {
    super('password hashing queue is full');
  }
}

type Job = { request: PasswordHashRequest; signIn: boolean; orgId: string | undefined; resolve: (key: Buffer) => void; reject: (err: Error) => void };

let worker: Worker | undefined;
let running: Job | undefined;
const queue: Job[] = [];
let waitingSignIns = 0;
const accountHashesByOrg = new Map<string, number>();
let nextId = 1;
let lastThreadId: number | undefined;
let idleTimer: NodeJS.Timeout | undefined;
let idleMs = PASSWORD_THREAD_IDLE_MS;

function finish(job: Job): void {
  if (job.signIn) waitingSignIns--;
  if (job.orgId === undefined) return;
  const left = (accountHashesByOrg.get(job.orgId) ?? 1) - 1;
  if (left === 0) accountHashesByOrg.delete(job.orgId);
  else accountHashesByOrg.set(job.orgId, left);
}

function spawn(): Worker {
  const w = startWorker('passwordHashWorker.js', import.meta.url, 'app/accounts/auth');
  w.on('message', (r: PasswordHashResponse) => {
    const job = running;
    if (!job || job.request.id !== r.id) return;
    running = undefined;
    finish(job);
    lastThreadId = r.threadId;
    if (r.ok) job.resolve(Buffer.from(r.key.buffer, r.key.byteOffset, r.key.byteLength));
    else job.reject(new Error(`password hashing failed: ${r.error}`));
    dispatch();
  });
  const fail = (err: Error) => {
    if (worker !== w) return;
    worker = undefined;
    const job = running;
    running = undefined;
    if (job) {
      finish(job);
      job.reject(err);
    }
    dispatch();
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`password hashing thread exited with code ${code}`)));
  return w;
}

/** Stops an idle hashing thread; `fail` ignores its exit, since it is no longer `worker`. */
function retire(): void {
  idleTimer = undefined;
  const w = worker;
  if (!w || running || queue.length > 0) return;
  worker = undefined;
  void w.terminate();
}

function dispatch(): void {
  while (!running) {
    const job = queue.shift();
    if (!job) {
      worker?.unref();
      if (worker && !idleTimer) {
        idleTimer = setTimeout(retire, idleMs);
        idleTimer.unref();
      }
      return;
    }
    clearTimeout(idleTimer);
    idleTimer = undefined;
    try {
      worker ??= spawn();
    } catch (err) {
      // The thread could not be started (new Worker throws ERR_WORKER_INIT_FAILED when no thread
      // can be made; the worker file may be gone after an upgrade in place): this job fails, its
      // sign-in slot is given back, and the next job tries again (this runs inside the worker's
      // event listeners too, where a throw would be uncaught).
      finish(job);
      job.reject(err instanceof Error ? err : new Error(String(err)));
      continue;
    }
    worker.ref();
    running = job;
    worker.postMessage(job.request);
  }
}

function enqueue(password: string, salt: Buffer, params: ScryptParams, keyLength: number, signIn: boolean, orgId?: string): Promise<Buffer> {
  if (signIn) {
    if (waitingSignIns >= MAX_WAITING_SIGN_INS) return Promise.reject(new PasswordHasherBusyError());
    waitingSignIns++;
  }
  if (orgId !== undefined) {
    const held = accountHashesByOrg.get(orgId) ?? 0;
    if (held >= MAX_ACCOUNT_HASHES_PER_ORG) return Promise.reject(new PasswordHasherBusyError());
    accountHashesByOrg.set(orgId, held + 1);
  }
  return new Promise<Buffer>((resolve, reject) => {
    queue.push({ request: { id: nextId++, password, salt, keyLength, ...params }, signIn, orgId, resolve, reject });
    dispatch();
  });
}

/** Whether a sign-in would be admitted now; checked before an attempt is counted against anyone. */
export function hasRoomForSignIn(): boolean {
  return waitingSignIns < MAX_WAITING_SIGN_INS;
}

/**
 * scrypt for a sign-in check, on the hashing thread. Rejects at once with PasswordHasherBusyError
 * when MAX_WAITING_SIGN_INS sign-ins are already waiting. The job is queued synchronously, so a
 * `hasRoomForSignIn()` just before, with no await in between, guarantees admission.
 */
export function hashForSignIn(password: string, salt: Buffer, params: ScryptParams, keyLength: number): Promise<Buffer> {
  return enqueue(password, salt, params, keyLength, true);
}

/**
 * scrypt for a new or changed password, on the hashing thread. Asked for an organization (`orgId`,
 * an owner's change), rejects at once with PasswordHasherBusyError while that organization already
 * has MAX_ACCOUNT_HASHES_PER_ORG in the line; the operator's (no `orgId`) are never refused.
 */
export function hashForAccount(password: string, salt: Buffer, params: ScryptParams, keyLength: number, orgId?: string): Promise<Buffer> {
  return enqueue(password, salt, params, keyLength, false, orgId);
}

/**
 * What the hasher is doing, for tests and diagnostics: the thread of the last finished hash, the
 * sign-ins waiting, and whether a hashing thread is running (started and not retired or dead).
 */
export function passwordHasherState(): { lastThreadId: number | undefined; waitingSignIns: number; threadRunning: boolean } {
  return { lastThreadId, waitingSignIns, threadRunning: worker !== undefined };
}

/** Tests: how long an idle hashing thread stays up (default PASSWORD_THREAD_IDLE_MS); applies from the next idle period. */
export function setPasswordThreadIdleMs(ms: number): void {
  idleMs = ms;
}
