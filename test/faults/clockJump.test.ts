import { describe, expect, test } from 'vitest';
import { postSign, setPolicy } from '../helpers/payments.js';
import { FAULT_TIMEOUT_MS } from './config.js';
import { RECIPIENT, rigPerTest, serverWallShifted, type FaultRig } from './harness.js';

const newRig = rigPerTest();
const DAY_PLUS_HOUR = 25 * 3600_000;

function pay(rig: FaultRig, usd: string, key: string) {
  return postSign(rig.server!.url, rig.bootstrap.api_key, {
    agent_id: rig.bootstrap.agent_id, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: usd,
  }, key);
}

describe('wall-clock jumps (faultfs shifts CLOCK_REALTIME of the real server process)', () => {
  test('property: a +25 h wall-clock jump neither empties the rolling cap window while running nor after a restart', async () => {
    const rig = newRig();
    await rig.start();
    await setPolicy(rig.admin, rig.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '10' });
    const first = await pay(rig, '10', 'jump-1');
    expect(first.status, first.text).toBe(200);

    rig.ctl({ clock_shift_ms: DAY_PLUS_HOUR });
    await serverWallShifted(rig.server!.url, DAY_PLUS_HOUR);
    const during = await pay(rig, '10', 'jump-2');
    expect(during.status, during.text).toBe(403);
    expect(during.json.reason).toMatch(/Spend cap of \$10 per 24 hours would be exceeded/);

    // Restarted in the same boot with the wall clock still a day ahead: the ledger clock goes on
    // from where it was by monotonic time, so the $10 still counts.
    await rig.stop();
    await rig.start();
    await serverWallShifted(rig.server!.url, DAY_PLUS_HOUR);
    const after = await pay(rig, '10', 'jump-3');
    expect(after.status, after.text).toBe(403);
    const replay = await pay(rig, '10', 'jump-1');
    expect(replay.status, replay.text).toBe(200);
    expect(replay.json.idempotent).toBe(true);
  }, FAULT_TIMEOUT_MS);
});
