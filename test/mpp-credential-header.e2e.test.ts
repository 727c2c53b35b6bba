import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent, type Admin } from './helpers/admin.js';
import { listAllTransactions, postSign, setPolicy } from './helpers/payments.js';
import { MPP_RECIPIENT, carriesPayment, startMppPeer, type MppPeer } from './helpers/peers.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

/**
 * An MPP challenge may name the header its credential goes in (mppx's `header` parameter, for
 * `Payment-Authorization`). A paywall that names any other header, `Cookie` say, would have the
 * payer overwrite its own session cookie with the payment credential: such a challenge is not one
 * paypolicy pays.
 */

const withHeader = (name: string) => (value: string) => `${value}, header="${name}"`;

let cookie: MppPeer;
let paymentAuthorization: MppPeer;
let s: TestServer;
let admin: Admin;
let agentId: string;

beforeAll(async () => {
  [cookie, paymentAuthorization] = await Promise.all([
    startMppPeer({ rewriteChallenge: withHeader('Cookie') }),
    startMppPeer({ rewriteChallenge: withHeader('Payment-Authorization') }),
  ]);
  s = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: [cookie.host, paymentAuthorization.host] });
  admin = adminFor(s);
  agentId = await createAgent(admin, s.bootstrap.org_id, 'mpp-header-agent');
  await setPolicy(admin, agentId, { allowlist: [MPP_RECIPIENT], capUsd: '10', thresholdUsd: '1' });
});

afterAll(async () => {
  await s?.close();
  await Promise.all([cookie?.close(), paymentAuthorization?.close()]);
});

describe('the header an MPP credential is sent in', () => {
  test('error: a challenge naming Cookie is no payment challenge: quote and sign answer 400, nothing is signed or recorded', async () => {
    const url = cookie.url('/mpp/paid?case=cookie');
    const q = await rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body: { url, agent_id: agentId }, headers: { connection: 'close' } });
    expect([q.status, q.json.code], q.text).toEqual([400, 'no_challenge']);
    const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'mpp', payload: { resource_url: url } });
    expect([r.status, r.json.code], r.text).toEqual([400, 'no_challenge']);
    expect(await listAllTransactions(admin, s.bootstrap.org_id, agentId)).toEqual([]);
    expect(cookie.requestsTo('/mpp/paid?case=cookie').filter(carriesPayment)).toEqual([]);
  });

  test('behavior: a challenge naming Payment-Authorization (mppx requiresAuth) is paid with the credential in that header', async () => {
    const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'mpp', payload: { resource_url: paymentAuthorization.url('/mpp/paid?case=pa') } });
    expect(r.status, r.text).toBe(200);
    expect(r.json.payment_header.name).toBe('Payment-Authorization');
    expect(r.json.payment_header.value).toMatch(/^Payment /);
  });
});
