import { afterAll, beforeAll, expect, test } from 'vitest';
import { adminFor, createAgent, upsertService, type Admin } from '../helpers/admin.js';
import { listAllTransactions, postSign, setPolicy } from '../helpers/payments.js';
import { PAY_TO, startX402Peer, type X402Peer } from '../helpers/peers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A paywall payment allowed only through a registered service (the agent's allowlist names the
 * service's slug, not the paywall's address) is attributed to that service when its challenge is
 * probed, before it waits for a signing thread. If the operator removes the service, or points it
 * elsewhere, and is told so before the payment's deciding write, that write must judge the
 * payment by the registry as it is then: nothing is signed on the strength of a service that is
 * no longer registered for that URL.
 */

let x402: X402Peer;
let s: TestServer;
let admin: Admin;

beforeAll(async () => {
  x402 = await startX402Peer();
  s = await startTestServer({ dev: true, probeAllowHosts: [x402.host] });
  admin = adminFor(s);
}, 30_000);
afterAll(async () => {
  await s?.close();
  await x402?.close();
});

let n = 0;
/** The organization's private record (undefined: a shared one) registered for the paywall. */
const own = () => s.bootstrap.org_id;
const register = (slug: string, orgId: string | undefined, baseUrl: string) =>
  admin.client.upsertService({ orgId, service: { slug, name: 'Race', paymentMethods: [{ realm: '', baseUrl, protocol: 'x402' }] } }, admin.auth);

test.each([
  ['removed from the registry', undefined, (slug: string) => admin.client.deleteService({ slug }, admin.auth)],
  ['moved to another URL', undefined, (slug: string) => upsertService(admin, { slug, name: 'moved', paymentMethods: [{ realm: '', baseUrl: 'https://elsewhere.example/svc', protocol: 'x402' }] })],
  // Private records are cached per organization: the change must reach the write all the same.
  ['removed from the organization\'s private registry', own, (slug: string) => admin.client.deleteService({ slug, orgId: own() }, admin.auth)],
  ['moved to another URL in the organization\'s private registry', own, (slug: string) => register(slug, own(), 'https://elsewhere.example/svc')],
])('error: the allowlisted service is %s while the payment is being signed: 403, nothing signed', async (_name, scope, change) => {
  const slug = `race-svc-${++n}`;
  await register(slug, scope?.(), x402.url('/svc'));
  const agentId = await createAgent(admin, s.bootstrap.org_id, slug);
  await setPolicy(admin, agentId, { allowlist: [slug], capUsd: '10', thresholdUsd: '5' });
  const body = { agent_id: agentId, type: 'x402' as const, chain_id: 8453, recipient_address: PAY_TO, amount_usd: 0.5, payload: { resource_url: x402.url('/svc/paid') } };

  // The real signing thread signs; the registry change is made and acknowledged before its answer comes back.
  const signer = s.app.deps.signer;
  const sign = signer.sign.bind(signer);
  let changed = 0;
  signer.sign = async (job) => {
    const out = await sign(job);
    if (changed++ === 0) await change(slug);
    return out;
  };
  let r;
  try {
    r = await postSign(s.url, s.bootstrap.api_key, body);
  } finally {
    signer.sign = sign;
  }
  expect(changed).toBeGreaterThan(0);
  expect([r.status, r.json.error], r.text).toEqual([403, 'Policy denied']);
  expect(r.json.signature).toBeUndefined();
  const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
  expect(rows.map((t) => t.status)).toEqual(['denied']);
  expect(rows[0]!.serviceSlug).toBe('');
});
