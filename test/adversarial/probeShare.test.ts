import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createTenant, type Tenant } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { postSign, recoverAuthorizationSigner, setPolicy } from '../helpers/payments.js';
import { PAY_TO, startHeldPeer, startX402Peer, type HeldPeer, type X402Peer } from '../helpers/peers.js';
import { holdSigning, type HeldSigning } from '../helpers/holdSigning.js';
import { bearer, expectRpcError } from '../helpers/rpc.js';
import { rest, startTestServer, type RestResult, type TestServer } from '../helpers/server.js';

/**
 * The paywall probes in flight (--max-probes, 32) and the payments in the signing stage
 * (--max-sign-queue) are shared by every organization. One organization whose paywall never
 * answers could hold every probe slot, and have every other organization's quotes and paywall signs
 * refused 503 overloaded until its probes timed out. Each organization holds at most its
 * share of each (three quarters by default, --max-probes-per-org and --max-sign-queue-per-org),
 * as it does of the agent gate (tenantShare.test.ts).
 */
const RECIPIENT = '0x4444444444444444444444444444444444444444';
const CLOSE = { connection: 'close' };

/** The answers of `calls` as they come, and a promise of the next one. */
function answers(calls: Array<Promise<RestResult>>) {
  const got: RestResult[] = [];
  let wake: (() => void) | undefined;
  for (const c of calls) {
    void c.then((r) => {
      got.push(r);
      wake?.();
    });
  }
  return { got, next: () => new Promise<void>((r) => (wake = r)) };
}

type Treasury = Tenant & { treasury: string };

async function tenantPaying(s: TestServer, name: string, allow: string): Promise<Treasury> {
  const admin = adminFor(s);
  const t = await createTenant(admin, name);
  await setPolicy(admin, t.agentId, { allowlist: [allow], capUsd: '100', thresholdUsd: '100' });
  const { treasuryAddress } = await admin.client.provisionTreasury({ orgId: t.orgId }, admin.auth);
  return { ...t, treasury: treasuryAddress };
}

function expectOrgOverloaded(r: RestResult): void {
  expect(r.status, r.text).toBe(503);
  expect(r.json.code).toBe('overloaded');
  expect(r.json.error).toMatch(/for this organization/);
}

describe('one organization\'s hung paywall holds at most its share of the probe slots (32, default share 24)', () => {
  let x402: X402Peer;
  let hung: HeldPeer;
  let s: TestServer;
  let a: Treasury;
  let b: Treasury;
  beforeAll(async () => {
    x402 = await startX402Peer();
    hung = await startHeldPeer(() => new Response('gone', { status: 404 }));
    s = await startTestServer({ logLevel: 'warn', dev: true, probeAllowHosts: [x402.host, hung.peer.host] });
    [a, b] = [await tenantPaying(s, 'probe-a', PAY_TO), await tenantPaying(s, 'probe-b', PAY_TO)];
  });
  afterAll(async () => {
    hung?.release();
    await s?.close();
    await Promise.all([x402?.close(), hung?.peer.close()]);
  });

  test('behavior: A\'s 40 quotes on a hung paywall take 24 slots and 16 are refused; B\'s 10 quotes and 10 x402 signs all succeed', async () => {
    const quoteOf = (t: Tenant, url: string) => rest(s.url, 'POST', '/api/quote', { key: t.apiKey, body: { url, agent_id: t.agentId }, headers: CLOSE });
    const held = Array.from({ length: 40 }, (_, i) => quoteOf(a, hung.peer.url(`/slow?i=${i}`)));
    const answered = answers(held);
    // Until every quote of A has either reached the paywall (where it hangs) or been answered.
    while (hung.parked() + answered.got.length < 40) await Promise.race([hung.reached(hung.parked() + 1), answered.next()]);
    expect(hung.parked()).toBe(24);
    expect(answered.got).toHaveLength(16);
    for (const r of answered.got) expectOrgOverloaded(r);

    // B, at most the 8 slots A leaves at once: quotes and paywall signs, every one served.
    const url = x402.url('/paid');
    const work: Array<() => Promise<void>> = [
      ...Array.from({ length: 10 }, () => async () => {
        const r = await quoteOf(b, url);
        expect(r.status, r.text).toBe(200);
        expect(r.json.status).toBe('allowed');
      }),
      ...Array.from({ length: 10 }, (_, i) => async () => {
        const r = await postSign(s.url, b.apiKey, { agent_id: b.agentId, type: 'x402', payload: { resource_url: url } }, `b-sign-${i}`);
        expect(r.status, r.text).toBe(200);
        expect(await recoverAuthorizationSigner(r.json.signature, r.json.authorization)).toBe(b.treasury);
      }),
    ];
    for (let i = 0; i < work.length; i += 8) await Promise.all(work.slice(i, i + 8).map((w) => w()));
    const rpc = connectClient(PaymentPolicyService, s.url);
    expect((await rpc.quote({ url, agentId: b.agentId }, bearer(b.apiKey))).recipient?.address).toBe(PAY_TO);
    // A's next probe is still refused, on Connect too, and never reaches the paywall.
    await expectRpcError(rpc.quote({ url: hung.peer.url('/slow?rpc'), agentId: a.agentId }, bearer(a.apiKey)), Code.Unavailable, /for this organization/);
    expect(hung.parked()).toBe(24);

    hung.release();
    for (const r of await Promise.all(held)) expect([400, 503], r.text).toContain(r.status);
    // The slots came back: A probes again.
    const again = await quoteOf(a, url);
    expect(again.status, again.text).toBe(200);
  });
});

describe('one organization holds at most its share of the signing stage (4, default share 3)', () => {
  let s: TestServer;
  let a: Treasury;
  let b: Treasury;
  let held: HeldSigning;
  beforeAll(async () => {
    s = await startTestServer({ logLevel: 'warn', limits: { maxSignQueue: 4, maxQueueMs: 60_000 } });
    [a, b] = [await tenantPaying(s, 'stage-a', RECIPIENT), await tenantPaying(s, 'stage-b', RECIPIENT)];
    // A's payments wait in the signer until released, as behind a stalled signing thread.
    held = holdSigning(s.app.deps.signer, (job) => job.orgId === a.orgId);
  });
  afterAll(async () => {
    held?.release();
    await s?.close();
  });

  const pay = (t: Tenant, key: string) => postSign(s.url, t.apiKey, {
    agent_id: t.agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1',
  }, key);

  test('behavior: A holds 3 of 4 places and its 4th payment is refused, writing nothing; B\'s payment is signed', async () => {
    const calls = [1, 2, 3, 4].map((i) => pay(a, `a-${i}`));
    const answered = answers(calls);
    // Until each of A's payments is either held in the signer or answered.
    while (held.parked() + answered.got.length < 4) await Promise.race([held.next(), answered.next()]);
    expect(held.parked()).toBe(3);
    expect(answered.got).toHaveLength(1);
    const refused = answered.got[0]!;
    expectOrgOverloaded(refused);

    const other = await pay(b, 'b-1');
    expect(other.status, other.text).toBe(200);

    expect(await recoverAuthorizationSigner(other.json.signature, other.json.authorization)).toBe(b.treasury);

    held.release();
    const all = await Promise.all(calls);
    expect(all.filter((r) => r.status === 200)).toHaveLength(3);
    // The refused one wrote nothing: its key is a first attempt now.
    const again = await pay(a, `a-${all.indexOf(refused) + 1}`);
    expect(again.status, again.text).toBe(200);
    expect(again.json.idempotent).toBe(false);
  });
});
