import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { rest } from '../helpers/server.js';
import { Load, missingAcks, openPolicy, rigPerTest, rollBackUnsynced } from './harness.js';
import { ACKS_PER_ROUND, FAULT_TIMEOUT_MS } from './config.js';

const newRig = rigPerTest();

describe('a failed fsync (faultfs fsync=eio)', () => {
  test('property: the service stops acknowledging, /readyz answers 503, one fatal line, exit 1; no acknowledged signature is lost', async () => {
    const rig = newRig();
    const s = await rig.start();
    await openPolicy(rig);
    const load = new Load(s.url, rig, 8, 'eio');
    await load.acked(ACKS_PER_ROUND);

    // From now on every sync of the WAL fails: the pages it covered may be gone.
    rig.ctl({ fsync: 'eio', fsync_match: '-wal' });
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    void s.exited.then((e) => (exit = e));
    const readyz: number[] = [];
    const deadline = Date.now() + 10_000;
    while (!exit && Date.now() < deadline) {
      try {
        readyz.push((await rest(s.url, 'GET', '/readyz', { headers: { connection: 'close' } })).status);
      } catch {
        // Refused once the process is gone.
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    const stopped = exit;
    // Still running after 10 s is a failure below; cut its power so the ledger can be checked.
    if (!stopped) await rig.powerCut();
    await load.stop();
    expect.soft(stopped).toEqual({ code: 1, signal: null });
    expect.soft(readyz).toContain(503);
    const fatal = s.stdout().split('\n').filter((l) => l.includes('"level":60'));
    expect.soft(fatal).toHaveLength(1);
    expect.soft(fatal[0]).toContain('storage failed');
    expect.soft(fatal[0]).toContain('paypolicy.db');

    // The disk keeps only what was synced; restart on it with the fault gone.
    rollBackUnsynced(rig.stateDir);
    rig.ctl({});
    await rig.start();
    const missing = await missingAcks(rig, load.acks.values());
    expect(missing, `${missing.length} of ${load.acks.size} acknowledgements lost; answers ${JSON.stringify([...load.statuses])}`).toEqual([]);
  }, FAULT_TIMEOUT_MS);

  test('property: restarted in the same boot after a failed WAL sync (the page cache still shows frames the disk lacks), no acknowledged signature is lost at the next power cut', async () => {
    const rig = newRig();
    let s = await rig.start();
    await openPolicy(rig);
    const before = new Load(s.url, rig, 8, 'before');
    await before.acked(ACKS_PER_ROUND);
    rig.ctl({ fsync: 'eio', fsync_match: '-wal' });
    await s.exited;
    await before.stop();
    // No roll-back: a supervisor restarts the process, not the machine. Slow syncs while it
    // starts let the reader below take its snapshot before any background checkpoint.
    rig.ctl({ fsync_delay_ms: 1000 });
    s = await rig.start();
    // A reader holding a snapshot (a backup) keeps the WAL from restarting meanwhile.
    const reader = new Database(join(rig.dataDir, 'paypolicy.db'), { readonly: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT COUNT(*) FROM transactions').get();
    rig.ctl({});
    const after = new Load(s.url, rig, 8, 'after');
    await after.acked(ACKS_PER_ROUND);
    s.child.kill('SIGKILL');
    await s.exited;
    reader.exec('COMMIT');
    reader.close();
    await rig.powerCut();
    await after.stop();
    await rig.start();
    const missing = await missingAcks(rig, [...before.acks.values(), ...after.acks.values()]);
    expect(missing, `${missing.length} of ${before.acks.size + after.acks.size} acknowledgements lost`).toEqual([]);
  }, FAULT_TIMEOUT_MS);
});
