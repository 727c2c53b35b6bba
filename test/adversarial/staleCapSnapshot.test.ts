import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor } from '../helpers/admin.js';
import { listAllTransactions, postSign, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

// The sign path's pre-check reads a remembered committed sum (src/app/payments/policyFacts.ts
// advisoryPolicyFacts) to choose whether to sign before the deciding write. That value is stale
// by design; these payments are built so that it says "allowed" while the ledger says "over the
// cap": the deciding write must still refuse, with no signature handed out and the cap exact.
const RECIPIENT = '0x2222222222222222222222222222222222222222';

describe('a stale cap snapshot never decides a payment', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await setPolicy(adminFor(server), server.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1', thresholdUsd: '100' });
  });
  afterAll(() => server?.close());

  const sign = (amount: string, key: string) => postSign(server.url, server.bootstrap.api_key, {
    agent_id: server.bootstrap.agent_id, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: amount,
  }, key);

  test('back-to-back payments that together pass the cap: the second is denied, never signed', async () => {
    // The first payment's deciding write remembers committed = 0 (read before its own insert), so
    // for the next second the pre-check believes the whole $1 is free.
    const first = await sign('0.60', 'stale-1');
    expect(first.status, first.text).toBe(200);
    const second = await sign('0.60', 'stale-2');
    expect(second.status, second.text).toBe(403);
    expect(second.json.signature).toBeUndefined();
    expect(second.json.reason).toMatch(/cap/i);
    // Concurrent ones on top: each has the same stale view; the ledger lets through only what fits.
    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => sign('0.10', `burst-${i}`)));
    expect(burst.filter((r) => r.status === 200)).toHaveLength(4);
    expect(burst.filter((r) => r.status === 403)).toHaveLength(8);
    const signed = await listAllTransactions(adminFor(server), server.bootstrap.org_id, server.bootstrap.agent_id, 'signed');
    const total = signed.reduce((sum, t) => sum + Math.round(Number(t.amountUsd) * 100), 0);
    expect(total).toBe(100);
  });
});
