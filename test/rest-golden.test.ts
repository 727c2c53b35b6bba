import { timestampMs } from '@bufbuild/protobuf/wkt';
import { TransactionStatus } from '../gen/paypolicy/v1/admin_pb.js';
import { AgentStatus } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent, upsertService, type Admin } from './helpers/admin.js';
import { PING_RECORD_INTERVAL_MS } from '../src/app/organizations/ping.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

/**
 * Golden JSON for the agent-facing REST surface that exists now: POST /api/ping and
 * GET /api/resolve. Whole bodies are compared with toEqual; only server-chosen ids are
 * substituted (from the bootstrap file or from the AdminService answers).
 */

const T0 = Date.parse('2030-01-02T03:04:05.678Z');

let s: TestServer;
let admin: Admin;
let clock = T0;
let weatherId: string;
let searchId: string;

/** The registry record of `weather-api` exactly as REST must write it. */
function weatherJson() {
  return {
    id: weatherId,
    slug: 'weather-api',
    name: 'Weather API',
    description: 'Forecasts by the minute',
    category: 'data',
    logoUrl: 'https://weather.example.com/logo.png',
    docsUrl: 'https://weather.example.com/docs',
    paymentMethods: [
      { realm: '', baseUrl: 'https://weather.example.com/v1', protocol: 'x402' },
      { realm: 'weather.example.com', baseUrl: 'https://weather.example.com/mpp', protocol: 'mpp' },
    ],
    endpoints: [
      {
        method: 'GET', path: '/forecast', description: 'Hourly forecast', priceAtomic: '10000',
        currency: 'USDC', pricingModel: 'per_request', protocol: 'x402',
      },
      {
        method: 'POST', path: '/batch', description: 'Dynamically priced batch', priceAtomic: null,
        currency: 'USDC', pricingModel: 'dynamic', protocol: 'mpp',
      },
    ],
  };
}

/** `search-api` has every optional field empty and no endpoints. */
function searchJson() {
  return {
    id: searchId,
    slug: 'search-api',
    name: 'Search API',
    description: '',
    category: '',
    logoUrl: '',
    docsUrl: '',
    paymentMethods: [{ realm: '', baseUrl: '', protocol: 'x402' }],
    endpoints: [],
  };
}

beforeAll(async () => {
  s = await startTestServer({ now: () => clock });
  admin = adminFor(s);
  const weather = await upsertService(admin, {
    slug: 'weather-api',
    name: 'Weather API',
    description: 'Forecasts by the minute',
    category: 'data',
    logoUrl: 'https://weather.example.com/logo.png',
    docsUrl: 'https://weather.example.com/docs',
    paymentMethods: [
      { realm: '', baseUrl: 'https://weather.example.com/v1', protocol: 'x402' },
      { realm: 'weather.example.com', baseUrl: 'https://weather.example.com/mpp', protocol: 'mpp' },
    ],
    endpoints: [
      { method: 'GET', path: '/forecast', description: 'Hourly forecast', priceAtomic: '10000', currency: 'USDC', pricingModel: 'per_request', protocol: 'x402' },
      // priceAtomic left unset: a dynamically priced endpoint, written as null on the wire.
      { method: 'POST', path: '/batch', description: 'Dynamically priced batch', currency: 'USDC', pricingModel: 'dynamic', protocol: 'mpp' },
    ],
  });
  weatherId = weather.id;
  const search = await upsertService(admin, { slug: 'search-api', name: 'Search API', paymentMethods: [{ protocol: 'x402' }] });
  searchId = search.id;
});
afterAll(async () => s.close());

const resolve = (query: string, key = s.bootstrap.api_key) => rest(s.url, 'GET', `/api/resolve${query}`, { key });

describe('POST /api/ping', () => {
  test('behavior: answers 200 with exactly ok, agent_id, agent_name, org_id, status', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ ok: true, agent_id: s.bootstrap.agent_id, agent_name: 'demo-agent', org_id: s.bootstrap.org_id, status: 'active' });
  });

  test('behavior: writes the fields in wire-protocol order', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
    expect(r.text).toBe(
      JSON.stringify({ ok: true, agent_id: s.bootstrap.agent_id, agent_name: 'demo-agent', org_id: s.bootstrap.org_id, status: 'active' }),
    );
  });

  test('behavior: response is JSON and not cacheable', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
    expect(r.headers.get('content-type')).toMatch(/^application\/json\b/);
    expect(r.headers.get('cache-control')).toBe('no-store');
  });

  test('error: an unknown body field is 400 invalid_argument naming it', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', {
      key: s.bootstrap.api_key,
      body: { agent_id: s.bootstrap.agent_id, extra: { nested: [1, 2] } },
    });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'Unknown field "extra" (this endpoint takes agent_id)', code: 'invalid_argument' });
  });

  test('behavior: a paused agent may ping and reports status paused', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'paused-bot');
    await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agentId } });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ ok: true, agent_id: agentId, agent_name: 'paused-bot', org_id: s.bootstrap.org_id, status: 'paused' });
  });

  test('behavior: reports the current agent name after a rename', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'old-name');
    await admin.client.updateAgent({ agentId, name: 'new-name' }, admin.auth);
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agentId } });
    expect(r.json).toEqual({ ok: true, agent_id: agentId, agent_name: 'new-name', org_id: s.bootstrap.org_id, status: 'active' });
  });

  test('behavior: records a zero-amount ping transaction in the ledger', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'ledger-bot');
    const before = await admin.client.listTransactions({ orgId: s.bootstrap.org_id, agentId }, admin.auth);
    expect(before.transactions).toEqual([]);
    clock = T0 + 1000;
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agentId } });
    expect(r.status).toBe(200);
    const after = await admin.client.listTransactions({ orgId: s.bootstrap.org_id, agentId }, admin.auth);
    expect(after.transactions).toHaveLength(1);
    const tx = after.transactions[0]!;
    expect(tx).toMatchObject({
      orgId: s.bootstrap.org_id, agentId, type: 'ping', status: TransactionStatus.RECORDED, amountUsd: '0', recipientAddress: '',
      approvalRequestId: '', serviceSlug: '',
    });
    expect(tx.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(timestampMs(tx.createdAt!)).toBe(T0 + 1000);
  });

  test('behavior: pings add one ledger row per agent per PING_RECORD_INTERVAL_MS (test/ping-flood.test.ts has the flood)', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'counting-bot');
    for (const at of [0, 1, PING_RECORD_INTERVAL_MS - 1, PING_RECORD_INTERVAL_MS]) {
      clock = T0 + 5_000 + at;
      const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agentId } });
      expect(r.status).toBe(200);
    }
    const list = await admin.client.listTransactions({ orgId: s.bootstrap.org_id, agentId }, admin.auth);
    expect(list.transactions.map((t) => [t.type, t.status, t.amountUsd, timestampMs(t.createdAt!)])).toEqual([
      ['ping', TransactionStatus.RECORDED, '0', T0 + 5_000 + PING_RECORD_INTERVAL_MS], ['ping', TransactionStatus.RECORDED, '0', T0 + 5_000],
    ]);
  });

  test('behavior: sets the agent lastPingAt to the time of the ping', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'clock-bot');
    const fresh = await admin.client.getAgent({ agentId }, admin.auth);
    expect(fresh.agent!.lastPingAt).toBeUndefined();
    clock = T0 + 60_000;
    await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agentId } });
    const first = await admin.client.getAgent({ agentId }, admin.auth);
    expect(timestampMs(first.agent!.lastPingAt!)).toBe(T0 + 60_000);
    clock = T0 + 120_000;
    await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agentId } });
    const second = await admin.client.getAgent({ agentId }, admin.auth);
    expect(timestampMs(second.agent!.lastPingAt!)).toBe(T0 + 120_000);
  });

  test('error: missing agent_id answers 400 with missing_agent_id and records nothing', async () => {
    const before = await admin.client.listTransactions({ orgId: s.bootstrap.org_id }, admin.auth);
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: {} });
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toMatch(/^application\/json\b/);
    expect(r.json).toEqual({ error: 'agent_id is required', code: 'missing_agent_id' });
    const after = await admin.client.listTransactions({ orgId: s.bootstrap.org_id }, admin.auth);
    expect(after.transactions.length).toBe(before.transactions.length);
  });

  test('error: unknown agent_id answers 400 with missing_agent_id', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: 'agt_0000000000000000' } });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'agent_id is unknown or revoked', code: 'missing_agent_id' });
  });
});

describe('GET /api/resolve', () => {
  test('behavior: slug= returns the registered record', async () => {
    const r = await resolve('?slug=weather-api');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ results: { 'weather-api': weatherJson() }, resolvedCount: 1, unresolvedCount: 0 });
  });

  test('behavior: response is JSON and not cacheable', async () => {
    const r = await resolve('?slug=weather-api');
    expect(r.headers.get('content-type')).toMatch(/^application\/json\b/);
    expect(r.headers.get('cache-control')).toBe('no-store');
  });

  test('behavior: a record with empty optional fields keeps them as empty strings and arrays', async () => {
    const r = await resolve('?slug=search-api');
    expect(r.json).toEqual({ results: { 'search-api': searchJson() }, resolvedCount: 1, unresolvedCount: 0 });
  });

  test('behavior: priceAtomic is a decimal string, or null for a dynamically priced endpoint', async () => {
    const r = await resolve('?slug=weather-api');
    const endpoints = r.json.results['weather-api'].endpoints;
    expect(endpoints[0].priceAtomic).toBe('10000');
    expect(endpoints[1]).toHaveProperty('priceAtomic', null);
    expect(r.text).toContain('"priceAtomic":null');
  });

  test('behavior: record keys are exactly the wire-protocol fields, in order', async () => {
    const r = await resolve('?slug=weather-api');
    const record = r.json.results['weather-api'];
    expect(Object.keys(record)).toEqual(['id', 'slug', 'name', 'description', 'category', 'logoUrl', 'docsUrl', 'paymentMethods', 'endpoints']);
    expect(Object.keys(record.paymentMethods[0])).toEqual(['realm', 'baseUrl', 'protocol']);
    expect(Object.keys(record.endpoints[0])).toEqual(['method', 'path', 'description', 'priceAtomic', 'currency', 'pricingModel', 'protocol']);
    expect(Object.keys(r.json)).toEqual(['results', 'resolvedCount', 'unresolvedCount']);
  });

  test('behavior: an unregistered slug maps to null', async () => {
    const r = await resolve('?slug=not-registered');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ results: { 'not-registered': null }, resolvedCount: 0, unresolvedCount: 1 });
  });

  test('behavior: slugs=a,b returns one entry per slug in request order', async () => {
    const r = await resolve('?slugs=weather-api,search-api');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ results: { 'weather-api': weatherJson(), 'search-api': searchJson() }, resolvedCount: 2, unresolvedCount: 0 });
    expect(Object.keys(r.json.results)).toEqual(['weather-api', 'search-api']);
  });

  test('behavior: registered and unregistered slugs mix', async () => {
    const r = await resolve('?slugs=missing-one,weather-api,missing-two');
    expect(r.json).toEqual({
      results: { 'missing-one': null, 'weather-api': weatherJson(), 'missing-two': null },
      resolvedCount: 1,
      unresolvedCount: 2,
    });
    expect(Object.keys(r.json.results)).toEqual(['missing-one', 'weather-api', 'missing-two']);
  });

  test('behavior: slug and slugs parameters are combined', async () => {
    const r = await resolve('?slug=weather-api&slugs=search-api,missing-one');
    expect(r.json).toEqual({
      results: { 'weather-api': weatherJson(), 'search-api': searchJson(), 'missing-one': null },
      resolvedCount: 2,
      unresolvedCount: 1,
    });
  });

  test('behavior: repeated parameters are combined', async () => {
    const r = await resolve('?slug=weather-api&slug=search-api');
    expect(r.json).toEqual({ results: { 'weather-api': weatherJson(), 'search-api': searchJson() }, resolvedCount: 2, unresolvedCount: 0 });
  });

  test('behavior: duplicate slugs collapse to one entry and count once', async () => {
    const r = await resolve('?slug=weather-api&slugs=weather-api,weather-api,missing-one,missing-one');
    expect(r.json).toEqual({ results: { 'weather-api': weatherJson(), 'missing-one': null }, resolvedCount: 1, unresolvedCount: 1 });
  });

  test('behavior: whitespace around slugs is trimmed and blank entries are dropped', async () => {
    const r = await resolve(`?slugs=${encodeURIComponent('  weather-api , ,search-api ,,')}`);
    expect(r.json).toEqual({ results: { 'weather-api': weatherJson(), 'search-api': searchJson() }, resolvedCount: 2, unresolvedCount: 0 });
  });

  test('behavior: + in the query decodes to a space and is trimmed', async () => {
    const r = await resolve('?slug=+weather-api+');
    expect(r.json).toEqual({ results: { 'weather-api': weatherJson() }, resolvedCount: 1, unresolvedCount: 0 });
  });

  test('behavior: slugs are not case-folded; an upper-case slug is unregistered', async () => {
    const r = await resolve('?slug=WEATHER-API');
    expect(r.json).toEqual({ results: { 'WEATHER-API': null }, resolvedCount: 0, unresolvedCount: 1 });
  });

  test('behavior: a slug __proto__ is a plain null entry', async () => {
    const r = await resolve('?slugs=__proto__,weather-api');
    expect(r.status).toBe(200);
    expect(r.text).toContain('"results":{"__proto__":null,');
    expect(Object.prototype.hasOwnProperty.call(r.json.results, '__proto__')).toBe(true);
    expect(Object.getOwnPropertyDescriptor(r.json.results, '__proto__')!.value).toBeNull();
    expect(r.json.results['weather-api']).toEqual(weatherJson());
    expect(r.json.resolvedCount).toBe(1);
    expect(r.json.unresolvedCount).toBe(1);
  });

  test('behavior: object-prototype names such as constructor and toString are plain null entries', async () => {
    const r = await resolve('?slugs=constructor,tostring,hasownproperty');
    expect(r.json).toEqual({ results: { constructor: null, tostring: null, hasownproperty: null }, resolvedCount: 0, unresolvedCount: 3 });
  });

  test('behavior: an upsert of an existing slug keeps its id and updates the record', async () => {
    await upsertService(admin, { slug: 'mutable-api', name: 'First', paymentMethods: [{ protocol: 'x402' }] });
    const first = await resolve('?slug=mutable-api');
    const updated = await upsertService(admin, { slug: 'mutable-api', name: 'Second', category: 'ai', paymentMethods: [{ protocol: 'mpp' }] });
    const second = await resolve('?slug=mutable-api');
    expect(second.json).toEqual({
      results: {
        'mutable-api': {
          id: first.json.results['mutable-api'].id, slug: 'mutable-api', name: 'Second', description: '', category: 'ai',
          logoUrl: '', docsUrl: '', paymentMethods: [{ realm: '', baseUrl: '', protocol: 'mpp' }], endpoints: [],
        },
      },
      resolvedCount: 1,
      unresolvedCount: 0,
    });
    expect(updated.id).toBe(first.json.results['mutable-api'].id);
  });

  test('behavior: a deleted service resolves to null', async () => {
    await upsertService(admin, { slug: 'short-lived', name: 'Short lived', paymentMethods: [{ protocol: 'x402' }] });
    expect((await resolve('?slug=short-lived')).json.resolvedCount).toBe(1);
    await admin.client.deleteService({ slug: 'short-lived' }, admin.auth);
    const r = await resolve('?slug=short-lived');
    expect(r.json).toEqual({ results: { 'short-lived': null }, resolvedCount: 0, unresolvedCount: 1 });
  });

  test('error: no slug parameter answers 400 {error, code}', async () => {
    const r = await resolve('');
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toMatch(/^application\/json\b/);
    expect(r.json).toEqual({ error: 'slug or slugs query parameter is required', code: 'slug_required' });
  });

  test('error: an empty slug= answers 400', async () => {
    const r = await resolve('?slug=');
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'slug or slugs query parameter is required', code: 'slug_required' });
  });

  test('error: slugs that are all blank answer 400', async () => {
    const r = await resolve(`?slugs=${encodeURIComponent(',, ,')}`);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'slug or slugs query parameter is required', code: 'slug_required' });
  });

  test('error: the removed entity parameter (or any other the route does not read) is a 400 naming it and the parameters it takes', async () => {
    const r = await resolve('?entity=weather-api');
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'Unknown query parameter "entity" (this endpoint takes slug, slugs)', code: 'invalid_argument' });
  });

  test('error: more than 100 distinct slugs answer 400 too_many_slugs', async () => {
    const slugs = Array.from({ length: 101 }, (_, i) => `s${i}`).join(',');
    const r = await resolve(`?slugs=${slugs}`);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'at most 100 slugs per request', code: 'too_many_slugs' });
  });

  test('behavior: exactly 100 distinct slugs are answered', async () => {
    const slugs = Array.from({ length: 99 }, (_, i) => `s${i}`).concat('weather-api');
    const r = await resolve(`?slugs=${slugs.join(',')}`);
    expect(r.status).toBe(200);
    expect(Object.keys(r.json.results)).toEqual(slugs);
    expect(r.json.resolvedCount).toBe(1);
    expect(r.json.unresolvedCount).toBe(99);
  });
});
