import { Code, ConnectError } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService, PaymentType } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createTenant, type Tenant } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { holdSigning, type HeldSigning } from '../helpers/holdSigning.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { bearer } from '../helpers/rpc.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The agent gate is shared by every organization, so one tenant whose requests hang (on a hung RPC
 * node, a slow paywall, or its own flood) could fill it and have everybody else refused 503
 * overloaded (140 raw payments on a hung node are enough). One organization may hold at most
 * --max-in-flight-per-org of it (three quarters by default): here 3 of 4.
 */
const RECIPIENT = '0x4444444444444444444444444444444444444444';

describe('one organization holds at most its share of the agent gate', () => {
  let s: TestServer;
  let a: Tenant;
  let b: Tenant;
  let signing: HeldSigning;
  beforeAll(async () => {
    s = await startTestServer({ logLevel: 'warn', limits: { maxInFlight: 4, maxQueueMs: 60_000 } });
    const admin = adminFor(s);
    a = await createTenant(admin, 'tenant-a');
    b = await createTenant(admin, 'tenant-b');
    for (const t of [a, b]) {
      await setPolicy(admin, t.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '100' });
      await admin.client.provisionTreasury({ orgId: t.orgId }, admin.auth);
    }
    // Payments of tenant A wait in the signer until released.
    signing = holdSigning(s.app.deps.signer, (job) => job.orgId === a.orgId);
  });
  afterAll(() => s?.close());

  const pay = (t: Tenant, key: string) => postSign(s.url, t.apiKey, {
    agent_id: t.agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1',
  }, key);

  test('behavior: A holds 3 of 4 slots; its next request is refused (REST and Connect), B is still served', async () => {
    const held = [1, 2, 3].map((i) => pay(a, `a-${i}`));
    await signing.reached(3);
    const refused = await pay(a, 'a-4');
    expect(refused.status, refused.text).toBe(503);
    expect(refused.json.code).toBe('overloaded');
    expect(refused.json.error).toMatch(/for this organization/);
    const rpc = connectClient(PaymentPolicyService, s.url);
    const err = await rpc.sign({ agentId: a.agentId, type: PaymentType.EIP3009, chainId: 8453, recipientAddress: RECIPIENT, amountUsd: '1', idempotencyKey: 'a-rpc' }, bearer(a.apiKey))
      .then(() => undefined, (e: unknown) => ConnectError.from(e));
    expect(err?.code).toBe(Code.Unavailable);
    expect(err?.rawMessage).toMatch(/for this organization/);

    const other = await pay(b, 'b-1');
    expect(other.status, other.text).toBe(200);
    const otherRpc = await rpc.sign({ agentId: b.agentId, type: PaymentType.EIP3009, chainId: 8453, recipientAddress: RECIPIENT, amountUsd: '1', idempotencyKey: 'b-rpc' }, bearer(b.apiKey));
    expect(otherRpc.signature).not.toBe('');

    signing.release();
    for (const r of await Promise.all(held)) expect(r.status, r.text).toBe(200);
    // The refused ones wrote nothing: the same keys are first attempts now.
    const again = await pay(a, 'a-4');
    expect(again.status, again.text).toBe(200);
    expect(again.json.idempotent).toBe(false);
  });
});
