import { getAddress, type Address } from 'viem';
import { ApprovalStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createAgent, upsertService, type Admin } from '../helpers/admin.js';
import { listAllTransactions, postSign, recoverAuthorizationSigner, setPolicy, type SignBody } from '../helpers/payments.js';
import { MPP_REALM, MPP_RECIPIENT, PAY_TO, openRedirect, startMppPeer, startX402Peer, type MppPeer, type X402Peer } from '../helpers/peers.js';
import { rest, startTestServer, type RestResult, type TestServer } from '../helpers/server.js';

/**
 * Attribution follows redirects, against the real server and real paywalls on
 * loopback. A registered service vouches only for a chain of URLs that stays, hop by hop, under
 * the base URLs it registered for the rail: an open redirect under a registered base URL must not
 * lend its slug to another paywall, in quote, in sign, and when an approved payment is collected.
 *
 * Peers: `weatherPeer` pays PAY_TO; its `/svc` and `/approval` are registered by `redir-weather`,
 * its `/changing` by `redir-sibling`, and `…/go?to=` anywhere on it is an open redirect.
 * `otherPeer` pays OTHER_PAYEE; its `/svc` is registered by `redir-other`, its `/paid` by nobody.
 */

const OTHER_PAYEE: Address = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';

let weatherPeer: X402Peer;
let otherPeer: X402Peer;
let mppPeer: MppPeer;
let s: TestServer;
let admin: Admin;
let treasury: Address;
/** Where `/svc/flip` on weatherPeer redirects; tests change it between approval and collection. */
let flipTo = '/svc/paid';

beforeAll(async () => {
  [weatherPeer, otherPeer, mppPeer] = await Promise.all([
    startX402Peer({ redirect: (url) => (url.pathname === '/svc/flip' ? flipTo : openRedirect(url)) }),
    startX402Peer({ payTo: OTHER_PAYEE, redirect: openRedirect }),
    startMppPeer({ redirect: openRedirect }),
  ]);
  s = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: [weatherPeer.host, otherPeer.host, mppPeer.host] });
  admin = adminFor(s);
  treasury = getAddress(s.bootstrap.treasury_address);
  await upsertService(admin, {
    slug: 'redir-weather', name: 'Redirect Weather',
    paymentMethods: [
      { realm: '', baseUrl: weatherPeer.url('/svc'), protocol: 'x402' },
      { realm: '', baseUrl: weatherPeer.url('/approval'), protocol: 'x402' },
    ],
  });
  await upsertService(admin, { slug: 'redir-sibling', name: 'Sibling', paymentMethods: [{ realm: '', baseUrl: weatherPeer.url('/changing'), protocol: 'x402' }] });
  await upsertService(admin, { slug: 'redir-other', name: 'Other', paymentMethods: [{ realm: '', baseUrl: otherPeer.url('/svc'), protocol: 'x402' }] });
  await upsertService(admin, { slug: 'redir-mpp', name: 'Redirect MPP', paymentMethods: [{ realm: MPP_REALM, baseUrl: mppPeer.url('/good'), protocol: 'mpp' }] });
});

afterAll(async () => {
  await s?.close();
  await Promise.all([weatherPeer?.close(), otherPeer?.close(), mppPeer?.close()]);
});

async function agentWith(allowlist: string[], thresholdUsd = '1'): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, 'redirects');
  await setPolicy(admin, agentId, { allowlist, capUsd: '10', thresholdUsd });
  return agentId;
}

function go(peerUrl: (path: string) => string, from: string, to: string): string {
  return `${peerUrl(from)}?to=${encodeURIComponent(to)}`;
}

function quote(agentId: string, url: string): Promise<RestResult> {
  return rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body: { url, agent_id: agentId }, headers: { connection: 'close' } });
}

function paywallSign(agentId: string, type: 'x402' | 'mpp', url: string, key?: string): Promise<RestResult> {
  const body: SignBody = { agent_id: agentId, type, chain_id: 8453, recipient_address: OTHER_PAYEE, amount_usd: 0.5, payload: { resource_url: url } };
  return postSign(s.url, s.bootstrap.api_key, body, key);
}

/** The note the server must give, written out here independently of src/. */
function strayed(slug: string, hop: string, first = false): string {
  const where = first ? `the request started at ${new URL(hop).href}` : `the request was redirected to ${new URL(hop).href}`;
  return `allowlisted service ${slug} cannot vouch: ${where}, outside its registered base URL`;
}

/** Every signed row of the agent pays one of `allowed` (lowercase addresses). */
async function expectSignedOnlyTo(agentId: string, allowed: string[]): Promise<void> {
  const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
  for (const row of rows.filter((r) => r.status === 'signed' || r.status === 'signing')) {
    expect(allowed).toContain(row.recipientAddress.toLowerCase());
  }
}

/** `note` gets the URL the agent asked for (the chain's first hop). */
type Case = { name: string; url: () => string; allowed: boolean; note?: (start: string) => string };

const corpus: Case[] = [
  {
    name: 'same-origin redirect inside the base URL',
    url: () => go(weatherPeer.url, '/svc/go', '/svc/paid'), allowed: true,
  },
  {
    name: 'two same-origin hops inside the base URL',
    url: () => go(weatherPeer.url, '/svc/go', `/svc/go?to=${encodeURIComponent('/svc/paid')}`), allowed: true,
  },
  {
    name: 'to a sibling base URL the same service registered',
    url: () => go(weatherPeer.url, '/svc/go', '/approval'), allowed: true,
  },
  {
    name: 'same origin, outside the base path',
    url: () => go(weatherPeer.url, '/svc/go', '/paid'), allowed: false,
    note: () => strayed('redir-weather', weatherPeer.url('/paid')),
  },
  {
    name: 'same origin, out of the base path through dot segments',
    url: () => go(weatherPeer.url, '/svc/go', '/svc/../paid'), allowed: false,
    note: () => strayed('redir-weather', weatherPeer.url('/paid')),
  },
  {
    name: 'to a sibling path another service registered',
    url: () => go(weatherPeer.url, '/svc/go', '/changing'), allowed: false,
    note: () => strayed('redir-weather', weatherPeer.url('/changing')),
  },
  {
    name: 'cross-origin to an unregistered paywall',
    url: () => go(weatherPeer.url, '/svc/go', otherPeer.url('/paid')), allowed: false,
    note: () => strayed('redir-weather', otherPeer.url('/paid')),
  },
  {
    name: 'cross-origin to another registered service',
    url: () => go(weatherPeer.url, '/svc/go', otherPeer.url('/svc/paid')), allowed: false,
    note: () => strayed('redir-weather', otherPeer.url('/svc/paid')),
  },
  {
    name: 'inside first, then cross-origin on the second hop',
    url: () => go(weatherPeer.url, '/svc/go', `/svc/go?to=${encodeURIComponent(otherPeer.url('/paid'))}`), allowed: false,
    note: () => strayed('redir-weather', otherPeer.url('/paid')),
  },
  {
    name: 'out and back in again',
    url: () => go(weatherPeer.url, '/svc/go', go(otherPeer.url, '/go', weatherPeer.url('/svc/paid'))), allowed: false,
    note: () => strayed('redir-weather', go(otherPeer.url, '/go', weatherPeer.url('/svc/paid'))),
  },
  {
    name: 'starts elsewhere and lands under the base URL',
    url: () => go(otherPeer.url, '/go', weatherPeer.url('/svc/paid')), allowed: false,
    note: (start) => strayed('redir-weather', start, true),
  },
];

describe('redirect chain corpus: an agent allowed only the slug redir-weather', () => {
  test.each(corpus)('quote: $name', async (c) => {
    const agentId = await agentWith(['redir-weather']);
    const url = `${c.url()}&case=quote`;
    const r = await quote(agentId, url);
    if (c.allowed) {
      expect(r.status, r.text).toBe(200);
      expect(r.json.recipient).toEqual({ address: PAY_TO, slug: 'redir-weather', name: 'Redirect Weather' });
    } else {
      expect(r.status, r.text).toBe(403);
      expect(r.json.recipient.slug).toBeNull();
      expect(r.json.recipient.name).toBeNull();
      expect(r.json.reason).toBe(`Recipient ${r.json.recipient.address.toLowerCase()} is not on the agent's allowlist: ${c.note!(url)}`);
    }
  });

  test.each(corpus)('sign: $name', async (c) => {
    const agentId = await agentWith(['redir-weather']);
    const url = `${c.url()}&case=sign`;
    const r = await paywallSign(agentId, 'x402', url);
    if (c.allowed) {
      expect(r.status, r.text).toBe(200);
      expect(r.json.authorization.to).toBe(PAY_TO);
      expect(await recoverAuthorizationSigner(r.json.signature, r.json.authorization)).toBe(treasury);
    } else {
      expect(r.status, r.text).toBe(403);
      expect(r.json.signature).toBeUndefined();
      expect(r.json.reason).toMatch(/^Recipient 0x[0-9a-f]{40} is not on the agent's allowlist: /);
      expect(r.json.reason.endsWith(c.note!(url)), r.json.reason).toBe(true);
    }
    await expectSignedOnlyTo(agentId, [PAY_TO.toLowerCase()]);
  });

  test('behavior: a cached offer keeps its chain: the cache hit is refused for the same hop', async () => {
    const agentId = await agentWith(['redir-weather']);
    const url = `${go(weatherPeer.url, '/svc/go', otherPeer.url('/paid'))}&case=cached`;
    const first = await quote(agentId, url);
    const second = await quote(agentId, url);
    expect([first.json.cached, second.json.cached]).toEqual([false, true]);
    for (const r of [first, second]) {
      expect(r.status, r.text).toBe(403);
      expect(r.json.reason).toBe(`Recipient ${OTHER_PAYEE.toLowerCase()} is not on the agent's allowlist: ${strayed('redir-weather', otherPeer.url('/paid'))}`);
    }
  });

  test('behavior: an agent allowed only redir-other cannot be paid through weather\'s redirect either', async () => {
    const agentId = await agentWith(['redir-other']);
    const start = go(weatherPeer.url, '/svc/go', otherPeer.url('/svc/paid'));
    const r = await paywallSign(agentId, 'x402', start);
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(`Recipient ${OTHER_PAYEE.toLowerCase()} is not on the agent's allowlist: ${strayed('redir-other', start, true)}`);
    await expectSignedOnlyTo(agentId, []);
  });

  test('behavior: an address on the allowlist still pays through a redirect (the policy names the payee itself)', async () => {
    const agentId = await agentWith([OTHER_PAYEE.toLowerCase()]);
    const r = await paywallSign(agentId, 'x402', go(weatherPeer.url, '/svc/go', otherPeer.url('/paid')));
    expect(r.status, r.text).toBe(200);
    expect(r.json.authorization.to).toBe(OTHER_PAYEE);
  });
});

describe('MPP: the registered realm does not excuse a redirect out of the base URL', () => {
  test('behavior: a redirect inside the base URL is attributed and signed', async () => {
    const agentId = await agentWith(['redir-mpp']);
    const r = await paywallSign(agentId, 'mpp', go(mppPeer.url, '/good/go', '/good/paid'));
    expect(r.status, r.text).toBe(200);
    expect(r.json.payment_header.value).toMatch(/^Payment /);
  });

  test('error: a redirect to an unregistered path on the same server → 403 naming the slug', async () => {
    const agentId = await agentWith(['redir-mpp']);
    const r = await paywallSign(agentId, 'mpp', go(mppPeer.url, '/good/go', '/bad/paid'));
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(`Recipient ${MPP_RECIPIENT.toLowerCase()} is not on the agent's allowlist: ${strayed('redir-mpp', mppPeer.url('/bad/paid'))}`);
    await expectSignedOnlyTo(agentId, []);
  });
});

describe('approved collection re-probes and re-attributes the chain', () => {
  async function approvedPayment(key: string): Promise<{ agentId: string; url: string; transactionId: string }> {
    flipTo = '/svc/paid';
    const agentId = await agentWith(['redir-weather'], '0.005');
    const url = `${weatherPeer.url('/svc/flip')}?case=${key}`;
    const pending = await paywallSign(agentId, 'x402', url, key);
    expect(pending.status, pending.text).toBe(202);
    const decided = await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE }, admin.auth);
    expect(decided.approval?.status).toBe(ApprovalStatus.APPROVED);
    return { agentId, url, transactionId: pending.json.transaction_id };
  }

  test('behavior: the redirect still stays inside the base URL → collected and signed', async () => {
    const { agentId, url } = await approvedPayment('collect-inside');
    const done = await paywallSign(agentId, 'x402', url, 'collect-inside');
    expect(done.status, done.text).toBe(200);
    expect(done.json.authorization.to).toBe(PAY_TO);
  });

  test('error: the redirect now leaves the base URL (same payee, same price) → 403, no signature, hold released', async () => {
    const { agentId, url, transactionId } = await approvedPayment('collect-outside');
    flipTo = '/paid';
    const done = await paywallSign(agentId, 'x402', url, 'collect-outside');
    expect(done.status, done.text).toBe(403);
    expect(done.json.signature).toBeUndefined();
    expect(done.json.reason).toBe(
      `Policy re-check at collection refused the approved payment: Recipient ${PAY_TO.toLowerCase()} is not on the agent's allowlist: ${strayed('redir-weather', weatherPeer.url('/paid'))}`,
    );
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows.map((r) => [r.id, r.status])).toEqual([[transactionId, 'denied']]);
    // A repeat replays the denial; it never signs later.
    flipTo = '/svc/paid';
    const again = await paywallSign(agentId, 'x402', url, 'collect-outside');
    expect(again.status, again.text).toBe(403);
    await expectSignedOnlyTo(agentId, []);
  });
});
