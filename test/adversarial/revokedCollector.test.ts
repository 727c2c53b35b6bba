import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createKey, type Admin } from '../helpers/admin.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { PAY_TO, startFetchPeer, v1Requirement, type Peer } from '../helpers/peers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A key revoked while it collects an approved payment gets no signature. The collecting API key is
 * checked when the repeat comes in, and the collection then probes the paywall again (and, for a
 * raw transaction, reads the node) before its write; a key revoked in between must not collect.
 * The write that starts signing re-reads the key, as a new payment's write does.
 */
let slow = false;
let peer: Peer;
let s: TestServer;
let admin: Admin;

beforeAll(async () => {
  peer = await startFetchPeer(async (req) => {
    if (slow) await new Promise((r) => setTimeout(r, 1_500));
    const url = new URL(req.url);
    return new Response(JSON.stringify({ x402Version: 1, error: 'X-PAYMENT header is required', accepts: [v1Requirement(`${url.origin}${url.pathname}`)] }), {
      status: 402, headers: { 'content-type': 'application/json' },
    });
  });
  s = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: [peer.host] });
  admin = adminFor(s);
  await setPolicy(admin, s.bootstrap.agent_id, { allowlist: [PAY_TO], capUsd: '1', thresholdUsd: '0.005' });
});
afterAll(async () => {
  await s?.close();
  await peer?.close();
});

describe('a key revoked while its repeat collects an approved payment', () => {
  test('error: 401 and no signature; the payment stays approved', async () => {
    const key = await createKey(admin, s.bootstrap.org_id, 'test', 'collector');
    const body = { agent_id: s.bootstrap.agent_id, type: 'x402', payload: { resource_url: peer.url('/paid') } } as const;
    const first = await postSign(s.url, key.plaintext, body, 'collect-1');
    expect(first.status, first.text).toBe(202);
    await admin.client.decideApproval({ id: first.json.approval_request_id, decision: Decision.APPROVE, note: '', decidedBy: 'op' }, admin.auth);

    slow = true;
    const repeat = postSign(s.url, key.plaintext, body, 'collect-1');
    await new Promise((r) => setTimeout(r, 400)); // the collection is probing the paywall
    await admin.client.revokeApiKey({ id: key.id }, admin.auth);
    const r = await repeat;
    slow = false;
    expect(r.status, r.text).toBe(401);
    expect(r.json.signature).toBeUndefined();
    expect((await s.app.deps.store.payments.get(first.json.transaction_id))?.status).toBe('approved');
  }, 20_000);
});
