import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { OPENAPI_DOCUMENT } from '../src/rest/openapi.js';
import { adminFor, createAgent, createTenant, upsertService, type Admin } from './helpers/admin.js';
import { setPolicy } from './helpers/payments.js';
import { closedPort, PAY_TO, startX402Peer, type X402Peer } from './helpers/peers.js';
import { rest, startTestServer, type RestResult, type TestServer } from './helpers/server.js';

/**
 * The OpenAPI document against real answers: every operation and every status it documents is
 * produced by a real server here, and each body is validated with Ajv (JSON Schema 2020-12)
 * against the document's schema for that operation and status; an answer with a status the
 * document does not list fails too. Only 500 (an unexpected failure) is not provoked.
 */

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }>; headers?: Record<string, unknown> }> }>> };
const doc = JSON.parse(JSON.stringify(OPENAPI_DOCUMENT)) as Doc;
const NOT_PROVOKED = new Set(['500']);

const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
ajv.addSchema(doc as object, 'openapi');

const seen = new Set<string>();
const pointer = (...parts: string[]) => parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

/** Asserts `r` is documented for (method, template) and that its body and headers match the document. */
function conforms(method: string, template: string, r: RestResult): void {
  const op = doc.paths[template]?.[method.toLowerCase()];
  expect(op, `${method} ${template} is documented`).toBeDefined();
  const status = String(r.status);
  const response = op!.responses[status];
  expect(response, `${method} ${template} documents ${status} (body ${r.text.slice(0, 200)})`).toBeDefined();
  seen.add(`${method.toLowerCase()} ${template} ${status}`);
  const content = response!.content?.['application/json'];
  if (!content) {
    expect(r.text, `${method} ${template} ${status} has no body`).toBe('');
    return;
  }
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  const validate = ajv.getSchema(`openapi#/${pointer('paths', template, method.toLowerCase(), 'responses', status, 'content', 'application/json', 'schema')}`)!;
  expect(validate(r.json), `${method} ${template} ${status}: ${JSON.stringify(validate.errors)} for ${r.text.slice(0, 400)}`).toBe(true);
  for (const name of Object.keys(response!.headers ?? {})) {
    if (name === 'Allow') expect(r.headers.get('allow')).toBeTruthy();
    if (name === 'Retry-After' && r.json?.code === 'overloaded') expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
  }
}

const STRANGER = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const CLOSE = { connection: 'close' };
let x402: X402Peer;
let deadPort: number;
let s: TestServer;
let admin: Admin;
let agentId: string;
let key: string;

/** A paywall that holds every request until released: keeps a probe (and its admission slot) busy. */
async function startHoldingPeer() {
  const held: http.ServerResponse[] = [];
  const arrived: Array<() => void> = [];
  const server = http.createServer((_req, res) => {
    held.push(res);
    arrived.shift()?.();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    host: `127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}/held`,
    nextRequest: () => new Promise<void>((resolve) => (held.length > 0 ? resolve() : arrived.push(resolve))),
    async close() {
      for (const res of held) res.end();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const call = (method: string, path: string, opts: { body?: unknown; rawBody?: string; headers?: Record<string, string>; key?: string | null } = {}) =>
  rest(s.url, method, path, { key: opts.key === null ? undefined : (opts.key ?? key), body: opts.body, rawBody: opts.rawBody, headers: { ...CLOSE, ...opts.headers } });

beforeAll(async () => {
  [x402, deadPort] = await Promise.all([startX402Peer(), closedPort()]);
  s = await startTestServer({ dev: true, probeAllowHosts: [x402.host, `127.0.0.1:${deadPort}`] });
  admin = adminFor(s);
  key = s.bootstrap.api_key;
  agentId = await createAgent(admin, s.bootstrap.org_id, 'openapi-agent');
  await setPolicy(admin, agentId, { allowlist: [PAY_TO], capUsd: '100', thresholdUsd: '1' });
  await upsertService(admin, { slug: 'openapi-svc', name: 'OpenAPI Service', description: 'd', category: 'c', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }], endpoints: [{ method: 'GET', path: '/svc/paid', description: 'paid', priceAtomic: '10000', currency: 'USDC', pricingModel: 'fixed', protocol: 'x402' }] });
});

afterAll(async () => {
  await s?.close();
  await x402?.close();
});

describe('OpenAPI document', () => {
  test('behavior: served at /api/openapi.json without a credential, equal to the source, valid OpenAPI 3.1 shape', async () => {
    const r = await call('GET', '/api/openapi.json', { key: null });
    conforms('GET', '/api/openapi.json', r);
    expect(r.json).toEqual(doc);
    expect(r.json.openapi).toBe('3.1.0');
    const head = await fetch(`${s.url}/api/openapi.json`, { method: 'HEAD', headers: CLOSE });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
    expect(head.headers.get('content-length')).toBe(r.headers.get('content-length'));
    const post = await call('POST', '/api/openapi.json', { key: null });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });

  test('behavior: every documented REST path is a route of the server, and the reverse', async () => {
    // An unknown path under /api is a 404 not_found before authentication; a documented one is not.
    for (const template of Object.keys(doc.paths)) {
      const path = template.replace('{id}', 'x');
      const method = Object.keys(doc.paths[template]!)[0]!.toUpperCase();
      const r = await call(method, path, { key: null });
      expect(r.json?.code === 'not_found' && r.status === 404 && template !== '/api/approvals/{id}/status', `${template} is routed`).toBe(false);
    }
    const { createRestRoutes } = await import('../src/rest/router.js');
    const routes = createRestRoutes(s.app.deps).map((r) => `${r.method.toLowerCase()} ${r.path}`);
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`)).filter((o) => o !== 'get /api/openapi.json');
    expect(documented.sort()).toEqual(routes.sort());
  });

  test('behavior: /api/ping answers as documented', async () => {
    conforms('POST', '/api/ping', await call('POST', '/api/ping', { body: { agent_id: agentId } }));
    conforms('POST', '/api/ping', await call('POST', '/api/ping', { body: { agent_id: 'agt_nope' } }));
    conforms('POST', '/api/ping', await call('POST', '/api/ping', { rawBody: 'x'.repeat(70_000), headers: { 'content-type': 'application/json' } }));
    conforms('POST', '/api/ping', await call('POST', '/api/ping', { key: 'ak_test_' + '0'.repeat(48), body: { agent_id: agentId } }));
    conforms('POST', '/api/ping', await call('GET', '/api/ping'));
  });

  test('behavior: /api/resolve answers as documented', async () => {
    const found = await call('GET', '/api/resolve?slug=openapi-svc&slug=missing');
    expect(found.json.results['openapi-svc']).not.toBeNull();
    conforms('GET', '/api/resolve', found);
    conforms('GET', '/api/resolve', await call('GET', '/api/resolve'));
    conforms('GET', '/api/resolve', await call('GET', '/api/resolve', { key: null }));
    conforms('GET', '/api/resolve', await call('POST', '/api/resolve', { body: {} }));
  });

  test('behavior: /api/sign answers as documented: every type, dry runs, refusals, errors', async () => {
    const sign = (body: Record<string, unknown>, headers: Record<string, string> = {}, k?: string) => call('POST', '/api/sign', { body, headers, key: k });
    const base = { agent_id: agentId, recipient_address: PAY_TO };
    for (const [type, payload] of [['eip3009', {}], ['permit2', {}], ['raw_transaction', {}], ['x402', { resource_url: x402.url('/paid?case=openapi') }]] as const) {
      const r = await sign({ ...base, type, amount_usd: type === 'x402' ? undefined : 0.25, payload });
      expect(r.status, r.text).toBe(200);
      conforms('POST', '/api/sign', r);
    }
    const pending = await sign({ ...base, type: 'eip3009', amount_usd: '5' }, { 'idempotency-key': 'openapi-pending' });
    expect(pending.status).toBe(202);
    conforms('POST', '/api/sign', pending);
    const denied = await sign({ ...base, type: 'eip3009', amount_usd: 0.5, recipient_address: STRANGER });
    expect(denied.status).toBe(403);
    conforms('POST', '/api/sign', denied);
    for (const amount of [0.5, 5]) conforms('POST', '/api/sign', await sign({ ...base, type: 'eip3009', amount_usd: amount, dry_run: true }));
    conforms('POST', '/api/sign', await sign({ ...base, type: 'eip3009', amount_usd: 0.5, dry_run: true, recipient_address: STRANGER }));
    conforms('POST', '/api/sign', await sign({ ...base, type: 'bogus', amount_usd: 1 }));
    conforms('POST', '/api/sign', await sign({ ...base, agent_id: 'agt_unknown', type: 'eip3009', amount_usd: 1 }));
    conforms('POST', '/api/sign', await sign({ ...base, type: 'eip3009', amount_usd: '6' }, { 'idempotency-key': 'openapi-pending' }));
    const r413 = await call('POST', '/api/sign', { rawBody: JSON.stringify({ pad: 'x'.repeat(70_000) }), headers: { 'content-type': 'application/json' } });
    conforms('POST', '/api/sign', r413);
    conforms('POST', '/api/sign', await sign(base, {}, 'ak_test_' + '1'.repeat(48)));
    conforms('POST', '/api/sign', await call('GET', '/api/sign'));
    // An organization without a treasury: 503 treasury_not_provisioned.
    const bare = await createTenant(admin, 'openapi-no-treasury');
    const noTreasury = await sign({ agent_id: bare.agentId, type: 'eip3009', recipient_address: PAY_TO, amount_usd: 1 }, {}, bare.apiKey);
    expect(noTreasury.json.code).toBe('treasury_not_provisioned');
    conforms('POST', '/api/sign', noTreasury);
  });

  test('behavior: /api/quote answers as documented', async () => {
    const quote = (body: Record<string, unknown>) => call('POST', '/api/quote', { body });
    conforms('POST', '/api/quote', await quote({ url: x402.url('/paid?case=openapi-ok'), agent_id: agentId }));
    const cheap = await createAgent(admin, s.bootstrap.org_id, 'openapi-threshold');
    await setPolicy(admin, cheap, { allowlist: [PAY_TO], capUsd: '100', thresholdUsd: '0.001' });
    conforms('POST', '/api/quote', await quote({ url: x402.url('/paid?case=openapi-202'), agent_id: cheap }));
    const stranger = await createAgent(admin, s.bootstrap.org_id, 'openapi-stranger');
    conforms('POST', '/api/quote', await quote({ url: x402.url('/paid?case=openapi-403'), agent_id: stranger }));
    conforms('POST', '/api/quote', await quote({ url: `http://127.0.0.1:${deadPort}/x`, agent_id: agentId }));
    conforms('POST', '/api/quote', await quote({ url: x402.url('/paid'), agent_id: 'agt_unknown' }));
    conforms('POST', '/api/quote', await call('POST', '/api/quote', { rawBody: 'y'.repeat(70_000) }));
    conforms('POST', '/api/quote', await call('POST', '/api/quote', { key: null, body: {} }));
    conforms('POST', '/api/quote', await call('GET', '/api/quote'));
  });

  test('behavior: /api/agents/{id}/spend and /api/approvals/{id}/status answer as documented', async () => {
    conforms('GET', '/api/agents/{id}/spend', await call('GET', `/api/agents/${agentId}/spend`));
    conforms('GET', '/api/agents/{id}/spend', await call('GET', '/api/agents/agt_unknown/spend'));
    conforms('GET', '/api/agents/{id}/spend', await call('GET', `/api/agents/${agentId}/spend`, { key: null }));
    conforms('GET', '/api/agents/{id}/spend', await call('POST', `/api/agents/${agentId}/spend`, { body: {} }));
    const pending = await call('POST', '/api/sign', { body: { agent_id: agentId, type: 'eip3009', recipient_address: PAY_TO, amount_usd: '7' } });
    conforms('GET', '/api/approvals/{id}/status', await call('GET', `/api/approvals/${pending.json.approval_request_id}/status`));
    conforms('GET', '/api/approvals/{id}/status', await call('GET', '/api/approvals/00000000-0000-4000-8000-000000000000/status'));
    conforms('GET', '/api/approvals/{id}/status', await call('GET', '/api/approvals/x/status', { key: null }));
    conforms('GET', '/api/approvals/{id}/status', await call('POST', '/api/approvals/x/status', { body: {} }));
  });

  test('behavior: 503 overloaded (with Retry-After) on every operation while the request bound is full', async () => {
    const peer = await startHoldingPeer();
    const small = await startTestServer({ dev: true, probeAllowHosts: [peer.host], limits: { maxInFlight: 1 } });
    try {
      const k = small.bootstrap.api_key;
      const a = adminFor(small);
      const agent = await createAgent(a, small.bootstrap.org_id, 'overloaded');
      const holding = rest(small.url, 'POST', '/api/quote', { key: k, body: { url: peer.url, agent_id: agent }, headers: CLOSE });
      await peer.nextRequest();
      for (const [method, template, path, body] of [
        ['POST', '/api/ping', '/api/ping', { agent_id: agent }], ['GET', '/api/resolve', '/api/resolve?slug=a', undefined],
        ['POST', '/api/sign', '/api/sign', { agent_id: agent, type: 'eip3009', recipient_address: PAY_TO, amount_usd: 1 }],
        ['POST', '/api/quote', '/api/quote', { url: peer.url, agent_id: agent }], ['GET', '/api/agents/{id}/spend', `/api/agents/${agent}/spend`, undefined],
        ['GET', '/api/approvals/{id}/status', '/api/approvals/x/status', undefined],
      ] as const) {
        const r = await rest(small.url, method, path, { key: k, body, headers: CLOSE });
        expect(r.json?.code, `${method} ${path}`).toBe('overloaded');
        conforms(method, template, r);
      }
      await peer.close();
      await holding;
    } finally {
      await small.close();
      await peer.close();
    }
  });

  test('behavior: every documented operation and status was produced by a real answer above (except 500)', () => {
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.entries(ops).flatMap(([m, op]) => Object.keys(op.responses).filter((st) => !NOT_PROVOKED.has(st)).map((st) => `${m} ${p} ${st}`)));
    expect(documented.filter((d) => !seen.has(d))).toEqual([]);
  });
});
