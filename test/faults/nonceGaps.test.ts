import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { postSign } from '../helpers/payments.js';
import { FAULT_TIMEOUT_MS, POWER_CUTS } from './config.js';
import { openPolicy, RECIPIENT, rigPerTest, type FaultRig } from './harness.js';

const newRig = rigPerTest();
const CHAIN = 8453;

/** `concurrency` agents-worth of raw_transaction load with fresh keys; returns the acknowledged nonces. */
function rawLoad(rig: FaultRig, concurrency: number, prefix: string) {
  const acked = new Map<string, number>();
  let stopped = false;
  let seq = 0;
  const run = async (i: number) => {
    while (!stopped) {
      const key = `${prefix}-${i}-${seq++}`;
      try {
        const r = await postSign(rig.server!.url, rig.bootstrap.api_key, {
          agent_id: rig.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.000001',
        }, key);
        if (r.status === 200) acked.set(key, Number(r.json.raw_transaction.nonce));
      } catch {
        await new Promise((r) => setTimeout(r, 5)); // the server is gone; do not spin
      }
    }
  };
  const running = Array.from({ length: concurrency }, (_, i) => run(i));
  return {
    acked,
    async until(n: number) {
      while (acked.size < n) await new Promise((r) => setTimeout(r, 5));
    },
    async stop() {
      stopped = true;
      await Promise.all(running);
    },
  };
}

function signedNonces(dataDir: string): number[] {
  const db = new Database(join(dataDir, 'paypolicy.db'), { readonly: true });
  try {
    return (db.prepare(`SELECT nonce FROM transactions WHERE type = 'raw_transaction' AND status = 'signed' AND chain_id = ? ORDER BY nonce`).all(CHAIN) as { nonce: number }[])
      .map((r) => r.nonce);
  } finally {
    db.close();
  }
}

describe('raw-transaction nonces under power cuts', () => {
  test(`property: after ${POWER_CUTS} power cuts under raw_transaction load, the signed nonces are unique and gap-free once released ones are reused`, async () => {
    const rig = newRig();
    await rig.start();
    await openPolicy(rig);
    const acked = new Map<string, number>();
    for (let cut = 0; cut < POWER_CUTS; cut++) {
      const load = rawLoad(rig, 16, `cut${cut}`);
      await load.until(30);
      await rig.powerCut(); // some reservations are mid-signature: their nonces must come back
      await load.stop();
      for (const [k, n] of load.acked) acked.set(k, n);
      await rig.start();
    }
    // Whatever the cuts released is reused lowest first by the next payments (at most 16 per cut).
    for (let i = 0; i < 16 * POWER_CUTS; i++) {
      const r = await postSign(rig.server!.url, rig.bootstrap.api_key, {
        agent_id: rig.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.000001',
      }, `fill-${i}`);
      expect(r.status, r.text).toBe(200);
      acked.set(`fill-${i}`, Number(r.json.raw_transaction.nonce));
    }
    await rig.stop();
    const nonces = signedNonces(rig.dataDir);
    expect(nonces).toEqual(nonces.map((_, i) => i));
    // Every acknowledged nonce is a signed one, and no two acknowledgements share a nonce.
    const ackedNonces = [...acked.values()];
    expect(new Set(ackedNonces).size).toBe(ackedNonces.length);
    for (const n of ackedNonces) expect(n).toBeLessThan(nonces.length);
  }, FAULT_TIMEOUT_MS);
});
