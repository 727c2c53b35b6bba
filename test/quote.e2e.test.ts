import type * as grpc from '@grpc/grpc-js';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { OfferStatus, PaymentPolicyService } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createAgent, createKey, createTenant, upsertService, type Admin, type Tenant } from './helpers/admin.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { listAllTransactions, setPolicy } from './helpers/payments.js';
import {
  BASE_SEPOLIA_USDC,
  MPP_REALM,
  MPP_RECIPIENT,
  PAY_TO,
  UNKNOWN_ASSET,
  closedPort,
  startFetchPeer,
  startMppPeer,
  startPlainPeer,
  startX402Peer,
  v1Requirement,
  type MppPeer,
  type Peer,
  type PlainPeer,
  type X402Peer,
} from './helpers/peers.js';
import { rest, startTestServer, type RestResult, type TestServer } from './helpers/server.js';

/**
 * POST /api/quote end to end: the real paypolicy server probes real payment peers listening on
 * 127.0.0.1 (an @x402/hono 2.27.0 paywall, a hand-written x402 v1 paywall, mppx 0.11.0 servers).
 * The test server runs in development mode with the peers' host:port on the probe allow-list; a
 * second server with the default configuration shows loopback stays blocked without them.
 * Every peer counts the requests it receives, so "never probed" is observed, not assumed.
 */

const STRANGER = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const BLOCKED = 'URL is not allowed (private/loopback hosts blocked)';

let x402: X402Peer;
let plain: PlainPeer;
let mpp: MppPeer;
let stripeOnly: MppPeer;
let deadPort: number;
let s: TestServer;
let defaults: TestServer;
let admin: Admin;
let other: Tenant;

beforeAll(async () => {
  [x402, plain, mpp, stripeOnly, deadPort] = await Promise.all([startX402Peer(), startPlainPeer(), startMppPeer(), startMppPeer({ stripeOnly: true }), closedPort()]);
  [s, defaults] = await Promise.all([
    startTestServer({ dev: true, probeAllowHosts: [x402.host, plain.host, mpp.host, stripeOnly.host, `127.0.0.1:${deadPort}`] }),
    startTestServer(),
  ]);
  admin = adminFor(s);
  // An organization without a treasury: CreateOrganization + key + agent, no ProvisionTreasury.
  other = await createTenant(admin, 'no-treasury');

  // Registry: the Weather API owns /svc on the x402 peer; elsewhere-svc owns a path nothing is
  // quoted under; on the MPP peer /good is registered with the challenge's realm and /badrealm
  // with a different one.
  await upsertService(admin, { slug: 'x402-weather', name: 'Weather API', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }] });
  await upsertService(admin, { slug: 'elsewhere-svc', name: 'Elsewhere', paymentMethods: [{ realm: '', baseUrl: x402.url('/elsewhere'), protocol: 'x402' }] });
  await upsertService(admin, { slug: 'mpp-good', name: 'MPP Good', paymentMethods: [{ realm: MPP_REALM, baseUrl: mpp.url('/good'), protocol: 'mpp' }] });
  await upsertService(admin, { slug: 'mpp-bad-realm', name: 'MPP Bad Realm', paymentMethods: [{ realm: 'some-other-realm', baseUrl: mpp.url('/badrealm'), protocol: 'mpp' }] });
});

afterAll(async () => {
  await Promise.all([s?.close(), defaults?.close()]);
  await Promise.all([x402?.close(), plain?.close(), mpp?.close(), stripeOnly?.close()]);
});

let agentCount = 0;
/** A fresh agent in the bootstrap organization (test key, treasury provisioned). */
async function agentWith(policy: { allowlist: string[]; cap?: string; threshold?: string }): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, `quote-e2e-${++agentCount}`);
  await setPolicy(admin, agentId, { allowlist: policy.allowlist, capUsd: policy.cap ?? '10', thresholdUsd: policy.threshold ?? '1' });
  return agentId;
}

function quote(body: Record<string, unknown>, key: string = s.bootstrap.api_key, server: TestServer = s): Promise<RestResult> {
  return rest(server.url, 'POST', '/api/quote', { key, body, headers: { connection: 'close' } });
}

const OFFER_KEYS = ['status', 'rail', 'chain_id', 'amount_usd', 'recipient', 'resource_url', 'scheme', 'network', 'realm', 'cached'];

/** The x402 offer of the peer's $0.01 Base Sepolia routes, as the wire protocol writes it. */
function x402Offer(url: string, extra: Record<string, unknown> = {}) {
  return {
    status: 'allowed', rail: 'x402', chain_id: 84532, amount_usd: 0.01,
    recipient: { address: PAY_TO, slug: null, name: null },
    resource_url: url, scheme: 'exact', network: 'eip155:84532', realm: null, cached: false,
    ...extra,
  };
}

function mppOffer(url: string, extra: Record<string, unknown> = {}) {
  return {
    status: 'allowed', rail: 'mpp', chain_id: 42431, amount_usd: 0.01,
    recipient: { address: MPP_RECIPIENT, slug: null, name: null },
    resource_url: url, scheme: null, network: 'tempo-testnet', realm: MPP_REALM, cached: false,
    ...extra,
  };
}

describe('POST /api/quote against an @x402/hono 2.27.0 paywall (v2)', () => {
  test('behavior: 200 with every Offer field, probed once without a payment', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/paid?case=fields');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual(x402Offer(url));
    expect(Object.keys(r.json)).toEqual(OFFER_KEYS);
    expect(Object.keys(r.json.recipient)).toEqual(['address', 'slug', 'name']);
    // amount_usd is a JSON number in the body text, not a string.
    expect(r.text).toContain('"amount_usd":0.01,');
    const seen = x402.requestsTo('/paid?case=fields');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'GET' });
    expect(seen[0]!.headers['payment-signature']).toBeUndefined();
  });

  test('behavior: a second quote within 60 s is cached: cached true and no second probe', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/paid?case=cache');
    const first = await quote({ url, agent_id: agentId });
    expect(first.json).toEqual(x402Offer(url));
    const second = await quote({ url, agent_id: agentId });
    expect(second.status).toBe(200);
    expect(second.json).toEqual(x402Offer(url, { cached: true }));
    // The verdict is still the asking agent's own: another agent of the organization hits the
    // cached offer but gets its own policy's answer.
    const stranger = await agentWith({ allowlist: [STRANGER] });
    const third = await quote({ url, agent_id: stranger });
    expect(third.status).toBe(403);
    expect(third.json).toMatchObject({ status: 'denied', cached: true });
    expect(x402.requestsTo('/paid?case=cache')).toHaveLength(1);
  });

  test('behavior: 202 with reason and approval_threshold_usd above the approval threshold', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], threshold: '0.005' });
    const url = x402.url('/paid?case=threshold');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(202);
    expect(r.json).toEqual(x402Offer(url, {
      status: 'pending_approval',
      reason: 'Amount $0.01 exceeds the approval threshold of 0.005 USD; a human must approve it',
      approval_threshold_usd: 0.005,
    }));
    expect(r.text).toContain('"approval_threshold_usd":0.005');
  });

  test('behavior: 403 with a reason when the recipient is not allowlisted', async () => {
    const agentId = await agentWith({ allowlist: [STRANGER] });
    const url = x402.url('/paid?case=unlisted');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(403);
    expect(r.json).toEqual(x402Offer(url, { status: 'denied', reason: `Recipient ${PAY_TO.toLowerCase()} is not on the agent's allowlist` }));
  });

  test('behavior: 403 with a reason when the payment would exceed the spend cap', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], cap: '0.005', threshold: '0.001' });
    const url = x402.url('/paid?case=cap');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(403);
    expect(r.json).toEqual(x402Offer(url, {
      status: 'denied',
      reason: 'Spend cap of $0.005 per 24 hours would be exceeded: $0 already committed, this payment is $0.01 ($0.005 left)',
    }));
  });

  test('behavior: a quote never signs or persists anything', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], threshold: '0.005' });
    for (const path of ['/paid?case=nowrite', '/paid?case=nowrite2']) {
      expect((await quote({ url: x402.url(path), agent_id: agentId })).status).toBe(202);
    }
    expect(await listAllTransactions(admin, s.bootstrap.org_id, agentId)).toEqual([]);
    expect(x402.requests.filter((r) => r.headers['payment-signature'] !== undefined)).toEqual([]);
  });

  test('behavior: a 405 to GET is retried with POST', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/post-only');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual(x402Offer(url));
    expect(x402.requestsTo('/post-only').map((q) => q.method)).toEqual(['GET', 'POST']);
  });

  test('behavior: method POST probes with POST directly', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/post-only?case=post');
    const r = await quote({ url, agent_id: agentId, method: 'POST' });
    expect(r.status, r.text).toBe(200);
    expect(x402.requestsTo('/post-only?case=post').map((q) => q.method)).toEqual(['POST']);
  });
});

describe('POST /api/quote: x402 v1 and MPP challenges', () => {
  test('behavior: an x402 v1 JSON-body challenge on base-sepolia is quoted', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = plain.url('/v1/paid');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({
      status: 'allowed', rail: 'x402', chain_id: 84532, amount_usd: 0.01,
      recipient: { address: PAY_TO, slug: null, name: null },
      resource_url: url, scheme: 'exact', network: 'base-sepolia', realm: null, cached: false,
    });
    expect(plain.requestsTo('/v1/paid')).toHaveLength(1);
  });

  test('behavior: an mppx tempo/charge challenge on Tempo testnet is quoted', async () => {
    const agentId = await agentWith({ allowlist: [MPP_RECIPIENT] });
    const url = mpp.url('/mpp/paid');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual(mppOffer(url));
    expect(Object.keys(r.json)).toEqual(OFFER_KEYS);
    expect(mpp.requestsTo('/mpp/paid')).toHaveLength(1);
  });

  test('behavior: MPP above the threshold is 202 with the threshold', async () => {
    const agentId = await agentWith({ allowlist: [MPP_RECIPIENT], threshold: '0.001' });
    const url = mpp.url('/mpp/paid?case=threshold');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(202);
    expect(r.json).toEqual(mppOffer(url, {
      status: 'pending_approval',
      reason: 'Amount $0.01 exceeds the approval threshold of 0.001 USD; a human must approve it',
      approval_threshold_usd: 0.001,
    }));
  });
});

describe('POST /api/quote: 400 reasons of the wire protocol, verbatim', () => {
  let agentId: string;
  beforeAll(async () => {
    agentId = await agentWith({ allowlist: [PAY_TO, MPP_RECIPIENT] });
  });

  async function reason(body: Record<string, unknown>, key?: string, server?: TestServer): Promise<string> {
    const r = await quote(body, key, server);
    expect(r.status, r.text).toBe(400);
    expect(typeof r.json?.error).toBe('string');
    return r.json.error as string;
  }

  test('error: url is required (missing or empty); null is no url but a value of the wrong type', async () => {
    expect(await reason({ agent_id: agentId })).toBe('url is required');
    expect(await reason({ agent_id: agentId, url: '' })).toBe('url is required');
    expect(await reason({ agent_id: agentId, url: null })).toBe('url must be a string');
  });

  test('error: Invalid URL', async () => {
    expect(await reason({ agent_id: agentId, url: 'not a url' })).toBe('Invalid URL');
    expect(await reason({ agent_id: agentId, url: 'http://' })).toBe('Invalid URL');
  });

  test('error: with the DEFAULT configuration, a running loopback peer is blocked and never contacted', async () => {
    const url = x402.url('/paid?case=default-config');
    expect(await reason({ agent_id: defaults.bootstrap.agent_id, url }, defaults.bootstrap.api_key, defaults)).toBe(BLOCKED);
    // https would not help either: the host is judged first.
    expect(await reason({ agent_id: defaults.bootstrap.agent_id, url: url.replace('http:', 'https:') }, defaults.bootstrap.api_key, defaults)).toBe(BLOCKED);
    expect(x402.requestsTo('/paid?case=default-config')).toEqual([]);
  });

  test('behavior: the probe allow-list is off by default and logs a warning when set', () => {
    const warned = (logs: string[]) => logs.map((l) => JSON.parse(l)).filter((l) => l.level === 40 && /PROBE_ALLOW_HOSTS/.test(l.msg));
    expect(warned(s.logs)).toHaveLength(1);
    expect(warned(defaults.logs)).toEqual([]);
  });

  test('error: the test allow-list exempts only its exact host:port', async () => {
    const port = new URL(x402.origin).port;
    for (const url of [`http://localhost:${port}/paid?case=alias`, `http://127.0.0.2:${port}/paid?case=alias`, `http://[::1]:${port}/paid?case=alias`, 'http://169.254.169.254/latest/meta-data']) {
      expect(await reason({ agent_id: agentId, url }), url).toBe(BLOCKED);
    }
    expect(x402.requestsTo('/paid?case=alias')).toEqual([]);
  });

  test('error: URL did not return a payment challenge (status 200)', async () => {
    expect(await reason({ agent_id: agentId, url: x402.url('/free') })).toBe('URL did not return a payment challenge (status 200)');
    expect(await reason({ agent_id: agentId, url: plain.url('/ok') })).toBe('URL did not return a payment challenge (status 200)');
    expect(await reason({ agent_id: agentId, url: plain.url('/missing') })).toBe('URL did not return a payment challenge (status 404)');
  });

  test('error: URL returned 402 but no parseable x402 or MPP challenge.', async () => {
    expect(await reason({ agent_id: agentId, url: plain.url('/garbage') })).toBe('URL returned 402 but no parseable x402 or MPP challenge.');
  });

  test('error: Could not reach URL: … when nothing listens', async () => {
    const text = await reason({ agent_id: agentId, url: `http://127.0.0.1:${deadPort}/paid` });
    expect(text).toBe('Could not reach URL: connection refused');
  });

  test('error: Unsupported x402 network … for a live key quoting a Base Sepolia offer', async () => {
    const live = await createKey(admin, s.bootstrap.org_id, 'live', 'live-quote');
    const text = await reason({ agent_id: agentId, url: x402.url('/paid?case=live') }, live.plaintext);
    expect(text).toMatch(/^Unsupported x402 network eip155:84532\b/);
    // The same offer is fine for a test key.
    expect((await quote({ agent_id: agentId, url: x402.url('/paid?case=live') })).status).toBe(200);
  });

  test('error: MPP method stripe not supported yet for a stripe-only challenge', async () => {
    expect(await reason({ agent_id: agentId, url: stripeOnly.url('/paid') })).toBe('MPP method stripe not supported yet');
  });

  test('error: Cannot price … for an unknown asset', async () => {
    const text = await reason({ agent_id: agentId, url: x402.url('/unknown-asset') });
    expect(text).toMatch(/^Cannot price /);
    expect(text).toContain(UNKNOWN_ASSET);
    expect(text).not.toContain(BASE_SEPOLIA_USDC);
  });

  test('error: a 400 is never cached: the peer is asked again', async () => {
    const before = x402.requestsTo('/free').length;
    await reason({ agent_id: agentId, url: x402.url('/free') });
    expect(x402.requestsTo('/free')).toHaveLength(before + 1);
  });
});

describe('POST /api/quote: cheap checks before any network work', () => {
  test('error: 404 for an agent of another organization, without contacting the peer', async () => {
    const r = await quote({ url: x402.url('/paid?case=404'), agent_id: other.agentId });
    expect(r.status, r.text).toBe(404);
    // The agent check comes before the URL's syntax, too.
    expect((await quote({ url: 'not a url', agent_id: other.agentId })).status).toBe(404);
    expect(x402.requestsTo('/paid?case=404')).toEqual([]);
  });

  test('error: 503 for an organization without a treasury, without contacting the peer', async () => {
    const r = await quote({ url: x402.url('/paid?case=503'), agent_id: other.agentId }, other.apiKey);
    expect(r.status, r.text).toBe(503);
    expect((await quote({ url: 'not a url', agent_id: other.agentId }, other.apiKey)).status).toBe(503);
    expect(x402.requestsTo('/paid?case=503')).toEqual([]);
  });

  test('error: 401 without a valid key, without contacting the peer', async () => {
    const r = await quote({ url: x402.url('/paid?case=401'), agent_id: s.bootstrap.agent_id }, 'ak_test_nope');
    expect(r.status).toBe(401);
    expect(x402.requestsTo('/paid?case=401')).toEqual([]);
  });
});

describe('POST /api/quote: registry as trust boundary', () => {
  test('behavior: a resource under a registered baseUrl fills recipient.slug and name', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/svc/paid');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual(x402Offer(url, { recipient: { address: PAY_TO, slug: 'x402-weather', name: 'Weather API' } }));
  });

  test('behavior: an allowlist holding only the attributed slug allows the runtime payTo', async () => {
    const agentId = await agentWith({ allowlist: ['x402-weather'] });
    const url = x402.url('/svc/paid?case=slug');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual(x402Offer(url, { recipient: { address: PAY_TO, slug: 'x402-weather', name: 'Weather API' } }));
  });

  test('error: the same slug does not vouch for a resource outside its baseUrl', async () => {
    const agentId = await agentWith({ allowlist: ['x402-weather'] });
    const url = x402.url('/paid?case=outside');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(403);
    expect(r.json).toMatchObject({ status: 'denied', recipient: { address: PAY_TO, slug: null, name: null } });
    expect(r.json.reason).toContain('not under a registered base URL of allowlisted service x402-weather');
  });

  test('error: a slug whose baseUrl does not cover the URL denies, saying the service could not be attributed', async () => {
    const agentId = await agentWith({ allowlist: ['elsewhere-svc'] });
    const url = x402.url('/paid?case=elsewhere');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(403);
    expect(r.json).toEqual(x402Offer(url, {
      status: 'denied',
      reason: `Recipient ${PAY_TO.toLowerCase()} is not on the agent's allowlist: the resource URL is not under a registered base URL of allowlisted service elsewhere-svc`,
    }));
  });

  // When the URL belongs to another registered service, the denial's reason says which service it
  // belongs to and which are allowed.
  test('error: a slug entry denies, naming the slug, when the URL belongs to another registered service', async () => {
    const agentId = await agentWith({ allowlist: ['elsewhere-svc'] });
    const url = x402.url('/svc/paid?case=other-service');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(403);
    expect(r.json.recipient).toEqual({ address: PAY_TO, slug: 'x402-weather', name: 'Weather API' });
    expect(r.json.reason).toContain('elsewhere-svc');
  });

  test('error: a slug that is not in the registry denies, saying so', async () => {
    const agentId = await agentWith({ allowlist: ['never-registered'] });
    const r = await quote({ url: x402.url('/paid?case=unregistered'), agent_id: agentId });
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toContain('never-registered is not in the registry');
  });

  test('behavior: MPP with the registered realm is attributed and allowed by slug', async () => {
    const agentId = await agentWith({ allowlist: ['mpp-good'] });
    const url = mpp.url('/good/paid');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual(mppOffer(url, { recipient: { address: MPP_RECIPIENT, slug: 'mpp-good', name: 'MPP Good' } }));
  });

  test('error: MPP whose challenge realm differs from the registered realm is denied, naming the realm', async () => {
    const agentId = await agentWith({ allowlist: ['mpp-bad-realm'] });
    const url = mpp.url('/badrealm/paid');
    const r = await quote({ url, agent_id: agentId });
    expect(r.status, r.text).toBe(403);
    expect(r.json).toMatchObject({ status: 'denied', realm: MPP_REALM, recipient: { address: MPP_RECIPIENT, slug: null, name: null } });
    expect(r.json.reason).toContain('realm');
    expect(r.json.reason).toContain(`"${MPP_REALM}"`);
    expect(r.json.reason).toContain('"some-other-realm"');
    expect(r.json.reason).toContain('mpp-bad-realm');
  });
});

describe('PaymentPolicyService.Quote over Connect JSON and gRPC', () => {
  let connect: Client<typeof PaymentPolicyService>;
  let channel: grpc.Client;
  beforeAll(() => {
    connect = connectClient(PaymentPolicyService, s.url);
    channel = grpcChannel(s.url);
  });
  afterAll(() => channel?.close());
  const opts = (key: string = s.bootstrap.api_key) => ({ headers: { authorization: `Bearer ${key}`, connection: 'close' } });

  test('behavior: Connect JSON gives the REST offer fields (and shares its cache)', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], threshold: '0.005' });
    const url = x402.url('/paid?case=connect');
    const viaRest = await quote({ url, agent_id: agentId });
    expect(viaRest.status).toBe(202);
    const r = await connect.quote({ url, agentId }, opts());
    expect(r.status).toBe(OfferStatus.PENDING_APPROVAL);
    expect({
      rail: r.rail, chain_id: r.chainId, amount_usd: Number(r.amountUsd), recipient: { address: r.recipient?.address, slug: r.recipient?.slug ?? null, name: r.recipient?.name ?? null },
      resource_url: r.resourceUrl, scheme: r.scheme ?? null, network: r.network, realm: r.realm ?? null, reason: r.reason,
      approval_threshold_usd: Number(r.approvalThresholdUsd),
    }).toEqual({
      rail: viaRest.json.rail, chain_id: viaRest.json.chain_id, amount_usd: viaRest.json.amount_usd, recipient: viaRest.json.recipient,
      resource_url: viaRest.json.resource_url, scheme: viaRest.json.scheme, network: viaRest.json.network, realm: viaRest.json.realm,
      reason: viaRest.json.reason, approval_threshold_usd: viaRest.json.approval_threshold_usd,
    });
    expect(r.amountUsd).toBe('0.01');
    expect(r.cached).toBe(true);
    expect(x402.requestsTo('/paid?case=connect')).toHaveLength(1);
  });

  test('behavior: gRPC quotes an MPP offer with realm set and scheme unset', async () => {
    const agentId = await agentWith({ allowlist: [MPP_RECIPIENT] });
    const url = mpp.url('/mpp/paid?case=grpc');
    const r = await grpcUnary(channel, PaymentPolicyService, PaymentPolicyService.method.quote, { url, agentId }, s.bootstrap.api_key);
    if (!r.ok) throw new Error(`gRPC Quote failed: ${r.code} ${r.details}`);
    const m = r.message;
    expect(m.status).toBe(OfferStatus.ALLOWED);
    expect(m).toMatchObject({ rail: 'mpp', chainId: 42431, amountUsd: '0.01', resourceUrl: url, network: 'tempo-testnet', realm: MPP_REALM, cached: false, reason: '' });
    expect(m.recipient?.address).toBe(MPP_RECIPIENT);
    expect(m.scheme).toBeUndefined();
    expect(m.approvalThresholdUsd).toBeUndefined();
    const viaRest = await quote({ url, agent_id: agentId });
    expect(viaRest.json).toEqual(mppOffer(url, { cached: true }));
  });

  test('error: Connect InvalidArgument carries the same reason texts', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const cases: Array<[string, string]> = [
      [`http://localhost:${new URL(x402.origin).port}/paid`, BLOCKED],
      [plain.url('/garbage'), 'URL returned 402 but no parseable x402 or MPP challenge.'],
      [stripeOnly.url('/connect'), 'MPP method stripe not supported yet'],
    ];
    for (const [url, text] of cases) {
      let caught: unknown;
      try {
        await connect.quote({ url, agentId }, opts());
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ConnectError);
      expect((caught as ConnectError).code).toBe(Code.InvalidArgument);
      expect((caught as ConnectError).rawMessage).toBe(text);
    }
  });

  test('error: Connect NotFound / Unavailable for another organization\'s agent / no treasury', async () => {
    const url = x402.url('/paid?case=connect-cheap');
    await expect(connect.quote({ url, agentId: other.agentId }, opts())).rejects.toMatchObject({ code: Code.NotFound });
    await expect(connect.quote({ url, agentId: other.agentId }, opts(other.apiKey))).rejects.toMatchObject({ code: Code.Unavailable });
    expect(x402.requestsTo('/paid?case=connect-cheap')).toEqual([]);
  });
});

describe('a price of zero: quote answers what sign answers', () => {
  let free: Peer;
  let freeMpp: MppPeer;
  let t: TestServer;
  let tAdmin: Admin;

  beforeAll(async () => {
    // An x402 v1 paywall and an mppx paywall, both asking for 0 of their token.
    free = await startFetchPeer((req) => Response.json(
      { x402Version: 1, error: 'X-PAYMENT header is required', accepts: [v1Requirement(req.url, '0')] }, { status: 402 }));
    freeMpp = await startMppPeer();
    freeMpp.setAmount('0');
    t = await startTestServer({ dev: true, probeAllowHosts: [free.host, freeMpp.host] });
    tAdmin = adminFor(t);
  });
  afterAll(async () => {
    await t?.close();
    await Promise.all([free?.close(), freeMpp?.close()]);
  });

  test.each([['x402', PAY_TO, 'x402 amount must be a positive integer'], ['mpp', MPP_RECIPIENT, 'MPP amount must be a positive integer in base units']] as const)(
    'error: a %s challenge for 0 is 400 on quote (REST and Connect), on a dry run and on sign, with the same reason, and nothing is recorded',
    async (rail, payTo, reason) => {
      const agentId = await createAgent(tAdmin, t.bootstrap.org_id, `zero-${rail}`);
      await setPolicy(tAdmin, agentId, { allowlist: [payTo], capUsd: '10', thresholdUsd: '1' });
      const url = rail === 'x402' ? free.url('/free') : freeMpp.url('/free');
      const answers = [
        await quote({ url, agent_id: agentId }, t.bootstrap.api_key, t),
        await rest(t.url, 'POST', '/api/sign', { key: t.bootstrap.api_key, body: { agent_id: agentId, type: rail, payload: { resource_url: url }, dry_run: true } }),
        await rest(t.url, 'POST', '/api/sign', { key: t.bootstrap.api_key, body: { agent_id: agentId, type: rail, payload: { resource_url: url } } }),
      ];
      for (const r of answers) {
        expect.soft(r.status, r.text).toBe(400);
        expect.soft(r.json, r.text).toEqual({ error: reason, code: 'invalid_argument' });
      }
      const connect = await connectClient(PaymentPolicyService, t.url).quote({ url, agentId }, { headers: { authorization: `Bearer ${t.bootstrap.api_key}` } })
        .then(() => undefined, (e: unknown) => e);
      expect(connect).toBeInstanceOf(ConnectError);
      expect((connect as ConnectError).code).toBe(Code.InvalidArgument);
      expect((connect as ConnectError).rawMessage).toBe(reason);
      expect(await listAllTransactions(tAdmin, t.bootstrap.org_id, agentId)).toEqual([]);
    },
  );
});
