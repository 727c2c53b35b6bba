import { closeSync, fdatasync, openSync } from 'node:fs';

export type WalSync = {
  /** Resolves once everything committed before this call is on stable storage. */
  afterCommit(): Promise<void>;
  /** Whether a sync is running now: what commits meanwhile waits for the next one anyway. */
  busy(): boolean;
  /**
   * Calls `listener` each time a sync has finished, before the next one starts, so a commit it
   * makes is carried by that next sync (writeQueue.ts holds a group's COMMIT until then); one listener.
   */
  onSettled(listener: () => void): void;
  /** Calls `listener` with the seconds each successful fdatasync took (metrics); one listener. */
  onSync(listener: (seconds: number) => void): void;
  close(): void;
};

/**
 * Makes group commits durable without blocking the event loop. With journal_mode=WAL and
 * synchronous=NORMAL a COMMIT appends its frames to the -wal file but does not sync it; a
 * transaction is durable once those frames are synced (that sync is all synchronous=FULL adds).
 * Here the sync is an fdatasync of the WAL file on libuv's thread pool, and callers are answered
 * only after one that started after their commit has finished. Syncs never overlap: commits that
 * land while one runs share the next, so the number of syncs falls as load rises.
 */
export function createWalSync(
  walPath: string,
  sync: (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void = fdatasync,
  onFailure: (err: Error) => void = () => {},
): WalSync {
  let fd: number | undefined;
  // A failed sync is final: a later sync that succeeds proves nothing about the pages the failed
  // one lost (Linux marks them clean), so every commit from then on is refused as not durable.
  let failed: Error | undefined;
  let committed = 0;
  let running = false;
  let waiters: Array<{ generation: number; resolve: () => void; reject: (e: unknown) => void }> = [];
  let observe: ((seconds: number) => void) | undefined;
  let settled: (() => void) | undefined;

  function kick(): void {
    if (running || waiters.length === 0) return;
    running = true;
    const target = committed;
    // Opened lazily: the -wal file exists once the first transaction has committed.
    fd ??= openSync(walPath, 'r+');
    const started = observe && process.hrtime.bigint();
    sync(fd, (err) => {
      running = false;
      if (started !== undefined && !err) observe?.(Number(process.hrtime.bigint() - started) / 1e9);
      if (err) {
        failed ??= new Error(`fdatasync of ${walPath} failed: ${err.code ?? err.message}`, { cause: err });
        onFailure(failed);
      }
      const done = failed ? waiters : waiters.filter((w) => w.generation <= target);
      waiters = failed ? [] : waiters.filter((w) => w.generation > target);
      for (const w of done) (failed ? w.reject(failed) : w.resolve());
      settled?.();
      kick();
    });
  }

  return {
    afterCommit() {
      const generation = ++committed;
      if (failed) return Promise.reject(failed);
      return new Promise<void>((resolve, reject) => {
        waiters.push({ generation, resolve, reject });
        kick();
      });
    },
    busy: () => running,
    onSettled(listener) {
      settled = listener;
    },
    onSync(listener) {
      observe = listener;
    },
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}
