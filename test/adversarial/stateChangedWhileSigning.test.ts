import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor } from '../helpers/admin.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A payment whose row changed state while its signature was being made (on PostgreSQL another
 * replica's upkeep can take over a row it believes a dead replica left in `signing`) is not a
 * server error. The signature is dropped unsent; the answer is a 409 `payment_state_changed`
 * telling the caller to repeat, and the repeat answers what the ledger holds. Reproduced here on
 * one server by moving the row in the database while its signer is held.
 */
const RECIPIENT = '0x5555555555555555555555555555555555555555';

describe('a row that changes state while it is being signed', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ logLevel: 'warn' });
    await setPolicy(adminFor(s), s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '100' });
  });
  afterAll(() => s?.close());

  test('error: 409 payment_state_changed, no signature, and the repeat answers the row as it is', async () => {
    const signer = s.app.deps.signer;
    const real = signer.sign;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let parked = false;
    signer.sign = async (job) => {
      parked = true;
      await gate;
      return real.call(signer, job);
    };
    try {
      // A raw transaction is reserved first (row `signing`), then signed, then settled.
      const answer = postSign(s.url, s.bootstrap.api_key, {
        agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1',
      }, 'moved-1');
      for (const until = Date.now() + 5_000; !parked;) {
        if (Date.now() > until) throw new Error('the payment never reached the signer');
        await new Promise((r) => setTimeout(r, 10));
      }
      // What another replica's repair does: the row is failed, its nonce handed back.
      const db = s.app.store.db;
      const moved = db.prepare(`UPDATE transactions SET status = 'failed', holds_cap = 0, reason = 'repaired elsewhere' WHERE idempotency_key = 'moved-1' AND status = 'signing'`).run();
      expect(moved.changes).toBe(1);
      release();
      const r = await answer;
      expect(r.status, r.text).toBe(409);
      expect(r.json.code).toBe('payment_state_changed');
      expect(r.text).not.toMatch(/"signature"|raw_transaction/);
      const repeat = await postSign(s.url, s.bootstrap.api_key, {
        agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1',
      }, 'moved-1');
      expect(repeat.status).not.toBe(500);
      expect(repeat.status).not.toBe(200);
    } finally {
      signer.sign = real;
      release();
    }
  });
});
