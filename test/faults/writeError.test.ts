import { describe, expect, onTestFinished, test } from 'vitest';
import { postSign } from '../helpers/payments.js';
import { Load, missingAcks, openPolicy, RECIPIENT, rigPerTest, rollBackUnsynced, spawnServer } from './harness.js';
import { ACKS_PER_ROUND, FAULT_TIMEOUT_MS } from './config.js';

const newRig = rigPerTest();

describe('write errors (faultfs write=enospc|erofs)', () => {
  test('property: EROFS under load stops the service (exit 1) and loses no acknowledged signature', async () => {
    const rig = newRig();
    const s = await rig.start();
    await openPolicy(rig);
    const load = new Load(s.url, rig, 8, 'erofs');
    await load.acked(ACKS_PER_ROUND);
    rig.ctl({ write: 'erofs' });
    const exit = await Promise.race([s.exited, new Promise((r) => setTimeout(r, 10_000, 'still running'))]);
    if (exit === 'still running') await rig.powerCut();
    await load.stop();
    expect.soft(exit).toEqual({ code: 1, signal: null });
    rollBackUnsynced(rig.stateDir);
    rig.ctl({});
    await rig.start();
    expect(await missingAcks(rig, load.acks.values())).toEqual([]);
  }, FAULT_TIMEOUT_MS);

  test('property: through a full disk and after it clears, no acknowledged signature is lost; new payments sign once space is back', async () => {
    const rig = newRig();
    const s = await rig.start();
    await openPolicy(rig);
    const before = new Load(s.url, rig, 8, 'before');
    await before.acked(ACKS_PER_ROUND);
    await before.stop();
    rig.ctl({ write: 'enospc' });
    const full = new Load(s.url, rig, 4, 'full');
    await new Promise((r) => setTimeout(r, 300));
    await full.stop();
    rig.ctl({});
    const after = new Load(s.url, rig, 8, 'after');
    await after.acked(ACKS_PER_ROUND);
    await rig.powerCut();
    await after.stop();
    await rig.start();
    expect(await missingAcks(rig, [...before.acks.values(), ...full.acks.values(), ...after.acks.values()])).toEqual([]);
  }, FAULT_TIMEOUT_MS);

  test('behavior: a payment refused by a full disk answers 503 storage_full with Retry-After and writes nothing; the same key signs once space is back', async () => {
    const rig = newRig();
    const s = await rig.start();
    await openPolicy(rig);
    const { api_key: key, agent_id: agentId } = rig.bootstrap;
    const body = { agent_id: agentId, type: 'eip3009' as const, chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.000001' };
    expect((await postSign(s.url, key, body, 'before-full')).status).toBe(200);
    rig.ctl({ write: 'enospc' });
    const full = await postSign(s.url, key, body, 'while-full');
    rig.ctl({});
    expect(full.status, full.text).toBe(503);
    expect(full.json).toEqual({ error: expect.stringMatching(/storage full/i), code: 'storage_full' });
    expect(full.headers.get('retry-after')).toBe('1');
    const again = await postSign(s.url, key, body, 'while-full');
    expect(again.status, again.text).toBe(200);
    // A first attempt, not a replay: the refused request left no row behind.
    expect(again.json.idempotent).toBe(false);
  }, FAULT_TIMEOUT_MS);

  test('error: a restart on a full disk exits 2 saying the disk is full, not that the lock file should be deleted; it starts once space is back', async () => {
    const rig = newRig();
    await rig.start();
    await rig.stop();
    rig.ctl({ write: 'enospc' });
    const refused = spawnServer({ dataDir: rig.dataDir, shim: { stateDir: rig.stateDir, ctlPath: rig.ctlPath } });
    // Had it started after all, it must not outlive the test (it would hold the directory's lock).
    onTestFinished(() => { if (refused.child.exitCode === null && refused.child.signalCode === null) refused.child.kill('SIGKILL'); });
    await expect(refused.process).rejects.toThrow();
    expect((await refused.exited).code).toBe(2);
    const { stderr } = refused.output();
    expect(stderr).toMatch(/^paypolicy: cannot start: .*full/m);
    expect(stderr).toContain('free some space');
    expect(stderr).not.toContain('delete');
    rig.ctl({});
    await rig.start();
    await rig.stop();
  }, FAULT_TIMEOUT_MS);

  test('error: a restart whose database files cannot grow (a full disk after the lock is taken) exits 2 naming the file and what to do', async () => {
    const rig = newRig();
    await rig.start();
    await rig.stop();
    // Only the write-ahead log fails to grow: the lock is taken, the first write at start fails.
    rig.ctl({ write: 'enospc', write_match: '-wal' });
    const refused = spawnServer({ dataDir: rig.dataDir, shim: { stateDir: rig.stateDir, ctlPath: rig.ctlPath } });
    // Had it started after all, it must not outlive the test (it would hold the directory's lock).
    onTestFinished(() => { if (refused.child.exitCode === null && refused.child.signalCode === null) refused.child.kill('SIGKILL'); });
    await expect(refused.process).rejects.toThrow();
    expect((await refused.exited).code).toBe(2);
    const { stderr } = refused.output();
    expect(stderr).toContain(`paypolicy: cannot start: cannot open ${rig.dataDir}/paypolicy.db (SQLITE_IOERR_`);
    expect(stderr).toContain('free some space and start again');
    rig.ctl({});
    await rig.start();
    await rig.stop();
  }, FAULT_TIMEOUT_MS);
});
