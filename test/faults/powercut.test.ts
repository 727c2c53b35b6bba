import { describe, expect, test } from 'vitest';
import { Load, missingAcks, openPolicy, rigPerTest } from './harness.js';
import { ACKS_PER_ROUND, FAULT_TIMEOUT_MS, POWER_CUTS } from './config.js';

const newRig = rigPerTest();

describe('power cut (faultfs keeps only fsync\'d bytes)', () => {
  test('positive control: with every sync turned into a no-op, acknowledged signatures are lost', async () => {
    const rig = newRig();
    const s = await rig.start();
    await openPolicy(rig);
    rig.ctl({ fsync: 'noop' });
    const load = new Load(s.url, rig, 8, 'control');
    await load.acked(ACKS_PER_ROUND);
    const undone = await rig.powerCut();
    await load.stop();
    rig.ctl({});
    await rig.start();
    expect(undone.records).toBeGreaterThan(0);
    // The harness sees a loss when there is one: here (almost) every acknowledgement is gone.
    const missing = await missingAcks(rig, load.acks.values());
    expect(missing.length).toBeGreaterThanOrEqual(ACKS_PER_ROUND);
  }, FAULT_TIMEOUT_MS);

  test(`property: over ${POWER_CUTS} power cuts under load, every acknowledged signature is signed in the ledger after restart`, async () => {
    const rig = newRig();
    const acks = new Map<string, string>();
    let s = await rig.start();
    await openPolicy(rig);
    for (let cut = 0; cut < POWER_CUTS; cut++) {
      const load = new Load(s.url, rig, 8, `cut${cut}`);
      await load.acked(ACKS_PER_ROUND);
      // Cut while requests are in flight, then restart on the same (rolled back) files.
      await rig.powerCut();
      await load.stop();
      for (const [k, id] of load.acks) acks.set(k, id);
      s = await rig.start();
      expect(await missingAcks(rig, acks.values())).toEqual([]);
    }
    expect(acks.size).toBeGreaterThanOrEqual(POWER_CUTS * ACKS_PER_ROUND);
  }, FAULT_TIMEOUT_MS);

  test('property: with every fsync delayed 30 ms (a slow disk), a power cut loses no acknowledged signature', async () => {
    const rig = newRig();
    const s = await rig.start();
    await openPolicy(rig);
    rig.ctl({ fsync_delay_ms: 30 });
    const load = new Load(s.url, rig, 16, 'slow');
    await load.acked(ACKS_PER_ROUND);
    await rig.powerCut();
    await load.stop();
    rig.ctl({});
    await rig.start();
    expect(await missingAcks(rig, load.acks.values())).toEqual([]);
  }, FAULT_TIMEOUT_MS);
});
