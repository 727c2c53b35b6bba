import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent, upsertService, type Admin } from '../helpers/admin.js';
import { listAllTransactions, postSign, setPolicy } from '../helpers/payments.js';
import { PAY_TO, startFetchPeer, v1Requirement, type Peer } from '../helpers/peers.js';
import { rest, startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Attribution judges the path a paywall's front end will route, not only the path the URL parser
 * sees. Many fronts read a path more loosely than WHATWG URL does: nginx decodes
 * %XX before it resolves `..` and merges slashes, Tomcat drops `;params` from a segment (`..;`),
 * IIS takes `\` (and `%5C`) as `/`, a double-decoding proxy turns `%252e` into `.`. Under such a
 * front, `https://host/a/..%2Fb/paid` is "under /a" to the parser but is served by `/b`.
 *
 * The peer here is such a front for two services on one origin: `/a` pays PAY_TO (svc-a), `/b`
 * pays OTHER (svc-b). An agent allowed only svc-a must never get a signature paying OTHER.
 */

const OTHER: Address = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';

/** How a lenient front routes a path: every escape decoded (twice), `\` as `/`, `;params` dropped, slashes merged, dots resolved. */
function frontRoute(pathname: string): string {
  let path = pathname;
  for (let i = 0; i < 2; i++) path = path.replace(/%([0-9a-f]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  const out: string[] = [];
  for (const raw of path.replace(/\\/g, '/').split('/').slice(1)) {
    const segment = raw.split(';')[0]!;
    if (segment === '..') out.pop();
    else if (segment !== '.' && segment !== '') out.push(segment);
  }
  return `/${out.join('/')}`;
}

let peer: Peer;
let s: TestServer;
let admin: Admin;
let agentId: string;

beforeAll(async () => {
  peer = await startFetchPeer((req) => {
    const route = frontRoute(new URL(req.url).pathname);
    const payTo = route.startsWith('/a/') ? PAY_TO : route.startsWith('/b/') ? OTHER : null;
    if (payTo === null) return new Response('not found', { status: 404 });
    const body = { x402Version: 1, error: 'payment required', accepts: [{ ...v1Requirement(req.url), payTo }] };
    return new Response(JSON.stringify(body), { status: 402, headers: { 'content-type': 'application/json' } });
  });
  s = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: [peer.host] });
  admin = adminFor(s);
  await upsertService(admin, { slug: 'path-a', name: 'A', paymentMethods: [{ realm: '', baseUrl: peer.url('/a'), protocol: 'x402' }] });
  await upsertService(admin, { slug: 'path-b', name: 'B', paymentMethods: [{ realm: '', baseUrl: peer.url('/b'), protocol: 'x402' }] });
  agentId = await createAgent(admin, s.bootstrap.org_id, 'path-confusion');
  await setPolicy(admin, agentId, { allowlist: ['path-a'], capUsd: '10', thresholdUsd: '5' });
});

afterAll(async () => {
  await s?.close();
  await peer?.close();
});

function quote(url: string) {
  return rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body: { url, agent_id: agentId }, headers: { connection: 'close' } });
}

function sign(url: string) {
  return postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'x402', payload: { resource_url: url } });
}

describe('paths a lenient front routes out of the base URL are not attributed to it', () => {
  test.each([
    ['an encoded slash after ..', '/a/..%2Fb/paid'],
    ['an encoded .. and slash', '/a/%2E%2E%2Fb/paid'],
    ['an encoded backslash after ..', '/a/..%5Cb/paid'],
    ['a Tomcat path parameter on ..', '/a/..;/b/paid'],
    ['a double-encoded ..', '/a/%252e%252e/b/paid'],
    ['a deeper climb through encoded slashes', '/a/x%2F..%2F..%2Fb/paid'],
  ])('error: %s (%s) → quote and sign refused naming the slug, no signature', async (_name, path) => {
    const url = peer.origin + path;
    const q = await quote(url);
    expect(q.json.recipient.address).toBe(OTHER);
    expect(q.json.status).toBe('denied');
    expect(q.json.recipient.slug ?? null).toBeNull();
    const r = await sign(url);
    expect(r.status).toBe(403);
    expect(r.json.signature).toBeUndefined();
    expect(r.json.reason).toContain('path-a');
  });

  test('property: no signed row of the agent pays OTHER', async () => {
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    const signed = rows.filter((row) => row.status === 'signed' || row.status === 'signing');
    expect(signed.map((row) => row.recipientAddress)).not.toContain(OTHER);
  });
});

describe('ordinary paths under the base URL still pay', () => {
  test.each([
    ['a plain path', '/a/paid'],
    ['an encoded space', '/a/hello%20world'],
    ['an encoded slash that stays inside', '/a/x%2Fpaid'],
    ['dots the parser resolves inside', '/a/x/../paid'],
  ])('behavior: %s (%s) → attributed to path-a and signed', async (_name, path) => {
    const url = peer.origin + path;
    const q = await quote(url);
    expect(q.json).toMatchObject({ status: 'allowed', recipient: { address: PAY_TO, slug: 'path-a' } });
    const r = await sign(url);
    expect(r.status).toBe(200);
    expect(r.json.signature).toMatch(/^0x[0-9a-f]{130}$/);
  });
});
