import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Address } from 'viem';
import { adminFor, createAgent, upsertService, type Admin } from './helpers/admin.js';
import { listAllTransactions, postSign, setPolicy } from './helpers/payments.js';
import { MPP_RECIPIENT, MPP_REALM, carriesPayment, startMppPeer, type MppPeer } from './helpers/peers.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * An MPP challenge may split its amount to other recipients. The allowlist must hold for every
 * address a payment pays: allowed by address, each split recipient must be allowlisted too;
 * allowed through a registry-attributed service slug, the service's own challenge decides.
 */
const SPLIT_TO: Address = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';

let peer: MppPeer;
let s: TestServer;
let admin: Admin;

beforeAll(async () => {
  peer = await startMppPeer({ splits: [{ amount: '0.004', recipient: SPLIT_TO }] });
  s = await startTestServer({ dev: true, probeAllowHosts: [peer.host] });
  admin = adminFor(s);
  await upsertService(admin, { slug: 'split-svc', name: 'Split Service', paymentMethods: [{ realm: MPP_REALM, baseUrl: peer.url('/svc'), protocol: 'mpp' }] });
});

afterAll(async () => {
  await s?.close();
  await peer?.close();
});

let n = 0;
async function agent(allowlist: string[]): Promise<string> {
  const id = await createAgent(admin, s.bootstrap.org_id, `split-${++n}`);
  await setPolicy(admin, id, { allowlist, capUsd: '10', thresholdUsd: '1' });
  return id;
}

function body(agentId: string, url: string) {
  return { agent_id: agentId, type: 'mpp', payload: { resource_url: url } };
}

describe('POST /api/sign type mpp with splits', () => {
  test('error: primary recipient allowlisted but the split recipient not → 403 naming the split, nothing signed', async () => {
    const agentId = await agent([MPP_RECIPIENT]);
    const url = peer.url('/plain/a');
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, url));
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(`The payment also pays ${SPLIT_TO.toLowerCase()} (a split), which is not on the agent's allowlist`);
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows.map((t) => t.status)).toEqual(['denied']);
    expect(peer.requestsTo('/plain/a').filter(carriesPayment)).toHaveLength(0);
  });

  test('behavior: both recipients allowlisted by address → 200, and the paywall accepts the split payment', async () => {
    const agentId = await agent([MPP_RECIPIENT, SPLIT_TO]);
    const url = peer.url('/plain/b');
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, url));
    expect(r.status, r.text).toBe(200);
    expect(r.json.cost_usd).toBe('0.01');
    const paid = await fetch(url, { headers: { accept: 'application/json', [r.json.payment_header.name]: r.json.payment_header.value } });
    expect(paid.status, await paid.clone().text()).toBe(200);
  });

  test('behavior: allowed through an attributed service slug, the service\'s splits are accepted', async () => {
    const agentId = await agent(['split-svc']);
    const url = peer.url('/svc/c');
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, url));
    expect(r.status, r.text).toBe(200);
    const paid = await fetch(url, { headers: { accept: 'application/json', [r.json.payment_header.name]: r.json.payment_header.value } });
    expect(paid.status).toBe(200);
  });

  test('error: quote reports the same refusal for an address-only allowlist', async () => {
    const agentId = await agent([MPP_RECIPIENT]);
    const r = await fetch(`${s.url}/api/quote`, {
      method: 'POST', headers: { authorization: `Bearer ${s.bootstrap.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: peer.url('/plain/d'), agent_id: agentId }),
    });
    expect(r.status).toBe(403);
    expect(((await r.json()) as { reason: string }).reason).toMatch(/also pays 0x90f79bf6eb2c4f870365e785982e1f101e93b906 \(a split\)/);
  });
});
