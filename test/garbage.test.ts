import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent } from './helpers/admin.js';
import { setPolicy } from './helpers/payments.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

/**
 * Agents send garbage. Whatever JSON (or not-JSON) arrives at an /api/* route, the answer is a
 * deliberate 2xx/4xx with a JSON body, never a 5xx, and the server keeps serving.
 */
const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';

let s: TestServer;
let agentId: string;

beforeAll(async () => {
  s = await startTestServer();
  const admin = adminFor(s);
  agentId = await createAgent(admin, s.bootstrap.org_id, 'garbage');
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '5', thresholdUsd: '1' });
});
afterAll(async () => s.close());

/** Values that look like what an agent might send, and plenty that do not. */
const jsonish = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1e308, 0.1, 1.0000001, '', ' ', '0x', RECIPIENT, 'eip3009', 'x402', 'mpp', 'raw_transaction', 'permit2'),
  fc.string({ maxLength: 40 }),
  fc.double(),
  fc.integer(),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.constant(null)), { maxKeys: 3 }),
);

const signBody = fc.record(
  {
    agent_id: fc.oneof(fc.constant(''), fc.constant('agt_000000000000000000000000'), jsonish),
    type: jsonish,
    chain_id: jsonish,
    recipient_address: jsonish,
    amount_usd: jsonish,
    payload: fc.oneof(jsonish, fc.record({ resource_url: jsonish, valid_for_seconds: jsonish, gas: jsonish, method: jsonish }, { requiredKeys: [] })),
    dry_run: jsonish,
  },
  { requiredKeys: [] },
);

function expectDeliberate(r: { status: number; text: string; json: unknown }, allowEmpty = false): void {
  expect(r.status, r.text).toBeGreaterThanOrEqual(200);
  expect(r.status, r.text).toBeLessThan(500);
  if (!allowEmpty || r.text !== '') expect(r.json, r.text).toBeTypeOf('object');
}

describe('garbage on /api/*', () => {
  test('behavior: random sign bodies (with the real agent id half the time) never get a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(signBody, fc.boolean(), fc.option(fc.string({ minLength: 1, maxLength: 300 })), async (body, realAgent, key) => {
        const b: Record<string, unknown> = { ...body };
        if (realAgent) b.agent_id = agentId;
        const headers: Record<string, string> = {};
        if (key !== null && /^[\x21-\x7e]+$/.test(key)) headers['idempotency-key'] = key;
        const r = await rest(s.url, 'POST', '/api/sign', { key: s.bootstrap.api_key, body: b, headers });
        expectDeliberate(r);
      }),
      { numRuns: 300 },
    );
  });

  test('behavior: random quote, ping and resolve inputs never get a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(jsonish, jsonish, jsonish, fc.string({ maxLength: 60 }), async (url, agent, method, slugs) => {
        const q = await rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body: { url, agent_id: agent, method } });
        expectDeliberate(q);
        const p = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agent } });
        expectDeliberate(p);
        const r = await rest(s.url, 'GET', `/api/resolve?slugs=${encodeURIComponent(slugs)}`, { key: s.bootstrap.api_key });
        expectDeliberate(r);
      }),
      { numRuns: 150 },
    );
  });

  test('behavior: random bytes as a body and random approval ids never get a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 200 }), fc.string({ maxLength: 60 }), async (bytes, id) => {
        const r = await rest(s.url, 'POST', '/api/sign', { key: s.bootstrap.api_key, rawBody: bytes, headers: { 'content-type': 'application/json' } });
        expectDeliberate(r);
        const a = await rest(s.url, 'GET', `/api/approvals/${encodeURIComponent(id)}/status`, { key: s.bootstrap.api_key });
        expectDeliberate(a, true);
      }),
      { numRuns: 200 },
    );
    const health = await rest(s.url, 'GET', '/healthz');
    expect(health.status).toBe(200);
    expect(s.logs.filter((l) => l.includes('"level":50'))).toEqual([]);
  });
});
