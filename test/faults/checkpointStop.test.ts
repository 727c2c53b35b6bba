import { describe, expect, test } from 'vitest';
import { Load, openPolicy, rigPerTest } from './harness.js';
import { ACKS_PER_ROUND, FAULT_TIMEOUT_MS } from './config.js';

const newRig = rigPerTest();

/**
 * The checkpoint thread is stopped when the storage fails (store.ts). While syncs fail, its own
 * checkpoints fail too; a thread terminated in the middle of one must not abort the whole process
 * (better-sqlite3 raising the SQLite error on an isolate being terminated: "FATAL ERROR:
 * v8::ToLocalChecked Empty MaybeLocal", SIGABRT) instead of the fail-stop exit 1. Slow syncs keep
 * the thread inside a checkpoint almost all the time, so the stop lands in one.
 */
describe('checkpoint thread at a storage failure', () => {
  for (let round = 0; round < 3; round++) {
    test(`property: syncs that fail slowly stop the service with exit 1, never an abort (round ${round + 1})`, async () => {
      const rig = newRig();
      const s = await rig.start();
      await openPolicy(rig);
      const load = new Load(s.url, rig, 8, 'slow-eio');
      await load.acked(ACKS_PER_ROUND);
      rig.ctl({ fsync: 'eio', fsync_delay_ms: 300 });
      const exit = await Promise.race([s.exited, new Promise((r) => setTimeout(r, 10_000, 'still running'))]);
      if (exit === 'still running') await rig.powerCut();
      await load.stop();
      expect(exit, s.stderr().slice(0, 2000)).toEqual({ code: 1, signal: null });
    }, FAULT_TIMEOUT_MS);
  }
});
