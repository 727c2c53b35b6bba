import { randomBytes } from 'node:crypto';
import { AgentStatus } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent, createKey, createTenant, type Admin, type Tenant } from './helpers/admin.js';
import { rest, startTestServer, type RestResult, type TestServer } from './helpers/server.js';

/**
 * Authentication of every /api/* route (wire protocol: Authentication) and organization
 * isolation of ping and approval status. For every route the key is checked first, before the
 * body, the query or the path parameters are looked at.
 */

let s: TestServer;
let admin: Admin;
let orgB: Tenant;
let revokedKey: string;

const APPROVAL_ID = '3f2504e0-4f89-41d3-9a0c-0305e82c3301';

type Route = { name: string; method: 'GET' | 'POST'; path: string; body?: (agentId: string) => unknown };

/** Every /api/* operation of the wire protocol with a request that is valid apart from the key. */
const ROUTES: Route[] = [
  { name: 'POST /api/ping', method: 'POST', path: '/api/ping', body: (agent_id) => ({ agent_id }) },
  { name: 'GET /api/resolve', method: 'GET', path: '/api/resolve?slug=weather-api' },
  {
    name: 'POST /api/sign', method: 'POST', path: '/api/sign',
    body: (agent_id) => ({ agent_id, type: 'raw_transaction', recipient_address: `0x${'11'.repeat(20)}`, amount_usd: 0.01 }),
  },
  { name: 'POST /api/quote', method: 'POST', path: '/api/quote', body: (agent_id) => ({ agent_id, url: 'https://example.com/paid' }) },
  { name: 'GET /api/approvals/{id}/status', method: 'GET', path: `/api/approvals/${APPROVAL_ID}/status` },
];

/** Authorization header values that must all be refused, by case name. */
function badCredentials(): Array<[string, string | undefined]> {
  const valid = s.bootstrap.api_key;
  return [
    ['no header', undefined],
    ['Basic scheme', `Basic ${Buffer.from('user:pass').toString('base64')}`],
    ['Bearer with nothing', 'Bearer'],
    ['Bearer with only spaces', 'Bearer    '],
    ['the key without a scheme', valid],
    ['wrong prefix ak_prod_', `Bearer ak_prod_${randomBytes(24).toString('hex')}`],
    ['well-formed unknown ak_test_ key', `Bearer ak_test_${randomBytes(24).toString('hex')}`],
    ['well-formed unknown ak_live_ key', `Bearer ak_live_${randomBytes(24).toString('hex')}`],
    ['revoked key', `Bearer ${revokedKey}`],
    ['valid key with trailing garbage', `Bearer ${valid}zz`],
    ['valid key followed by a second token', `Bearer ${valid} extra`],
    ['valid key truncated', `Bearer ${valid.slice(0, -1)}`],
    ['valid key upper-cased', `Bearer ${valid.toUpperCase()}`],
    ['admin token as an API key', `Bearer ${s.bootstrap.admin_token}`],
  ];
}

async function call(r: Route, authorization: string | undefined): Promise<RestResult> {
  const headers: Record<string, string> = {};
  if (authorization !== undefined) headers.authorization = authorization;
  return rest(s.url, r.method, r.path, { body: r.body?.(s.bootstrap.agent_id), headers });
}

function expect401(res: RestResult): void {
  expect(res.status).toBe(401);
  expect(res.headers.get('content-type')).toMatch(/^application\/json\b/);
  expect(res.json).toEqual({ error: expect.any(String), code: 'unauthenticated' });
  expect(res.json.error.length).toBeGreaterThan(0);
}

beforeAll(async () => {
  s = await startTestServer();
  admin = adminFor(s);
  orgB = await createTenant(admin, 'org-b', 'live');
  const k = await createKey(admin, s.bootstrap.org_id, 'test', 'to-revoke');
  await admin.client.revokeApiKey({ id: k.id }, admin.auth);
  revokedKey = k.plaintext;
});
afterAll(async () => s.close());

describe('Authorization on /api/*', () => {
  test('behavior: the bootstrap ak_test_ key is accepted on ping and resolve', async () => {
    expect(s.bootstrap.api_key).toMatch(/^ak_test_/);
    expect((await call(ROUTES[0]!, `Bearer ${s.bootstrap.api_key}`)).status).toBe(200);
    expect((await call(ROUTES[1]!, `Bearer ${s.bootstrap.api_key}`)).status).toBe(200);
  });

  test('behavior: an ak_live_ key is accepted', async () => {
    const live = await createKey(admin, s.bootstrap.org_id, 'live', 'live-key');
    expect(live.plaintext).toMatch(/^ak_live_[0-9a-f]{48}$/);
    const r = await rest(s.url, 'POST', '/api/ping', { key: live.plaintext, body: { agent_id: s.bootstrap.agent_id } });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ ok: true, agent_id: s.bootstrap.agent_id, agent_name: 'demo-agent', org_id: s.bootstrap.org_id, status: 'active' });
  });

  test('behavior: the scheme name is case-insensitive (RFC 7235)', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { headers: { authorization: `bearer ${s.bootstrap.api_key}` }, body: { agent_id: s.bootstrap.agent_id } });
    expect(r.status).toBe(200);
  });

  for (const r of ROUTES) {
    test(`error: unauthenticated on ${r.name} for every malformed, unknown or revoked credential`, async () => {
      for (const [name, header] of badCredentials()) {
        const res = await call(r, header);
        expect.soft(res.status, `${r.name} with ${name}`).toBe(401);
        expect401(res);
      }
    });
  }

  test('error: unknown and revoked keys get the same 401 body', async () => {
    const route = ROUTES[0]!;
    const unknown = await call(route, `Bearer ak_test_${randomBytes(24).toString('hex')}`);
    const revoked = await call(route, `Bearer ${revokedKey}`);
    expect401(unknown);
    expect(revoked.json).toEqual(unknown.json);
  });

  test('error: authentication comes before the body is parsed', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { rawBody: '{not json', headers: { 'content-type': 'application/json' } });
    expect401(r);
    const sign = await rest(s.url, 'POST', '/api/sign', { rawBody: '[]', headers: { 'content-type': 'application/json' } });
    expect401(sign);
    const quote = await rest(s.url, 'POST', '/api/quote', { body: {} });
    expect401(quote);
  });

  test('error: authentication comes before query validation', async () => {
    const r = await rest(s.url, 'GET', '/api/resolve');
    expect401(r);
  });

  test('error: authentication comes before the approval id is looked at', async () => {
    for (const id of ['not-a-uuid', '%E0%A4%A', '00000000-0000-0000-0000-000000000000']) {
      expect401(await rest(s.url, 'GET', `/api/approvals/${id}/status`));
    }
  });

  test('error: a key revoked through RevokeApiKey fails on the very next request', async () => {
    const k = await createKey(admin, s.bootstrap.org_id, 'test', 'short-lived');
    const ok = await rest(s.url, 'POST', '/api/ping', { key: k.plaintext, body: { agent_id: s.bootstrap.agent_id } });
    expect(ok.status).toBe(200);
    const revoked = await admin.client.revokeApiKey({ id: k.id }, admin.auth);
    expect(revoked.apiKey!.revokedAt).toBeDefined();
    const next = await rest(s.url, 'POST', '/api/ping', { key: k.plaintext, body: { agent_id: s.bootstrap.agent_id } });
    expect401(next);
    expect401(await rest(s.url, 'GET', '/api/resolve?slug=x', { key: k.plaintext }));
  });

  test('behavior: revoking one key leaves the organization other keys working', async () => {
    const k = await createKey(admin, s.bootstrap.org_id, 'test', 'sibling');
    await admin.client.revokeApiKey({ id: k.id }, admin.auth);
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
    expect(r.status).toBe(200);
  });

  test('behavior: revoking a key twice is harmless and keeps it revoked', async () => {
    const k = await createKey(admin, s.bootstrap.org_id, 'live', 'twice');
    const first = await admin.client.revokeApiKey({ id: k.id }, admin.auth);
    const second = await admin.client.revokeApiKey({ id: k.id }, admin.auth);
    expect(second.apiKey!.revokedAt).toEqual(first.apiKey!.revokedAt);
    expect401(await rest(s.url, 'POST', '/api/ping', { key: k.plaintext, body: { agent_id: s.bootstrap.agent_id } }));
  });

  test('error: a very long bearer token is a 401, not a server error', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { headers: { authorization: `Bearer ${'a'.repeat(8000)}` }, body: { agent_id: s.bootstrap.agent_id } });
    expect401(r);
  });
});

describe('POST /api/ping organization isolation', () => {
  const ping = (key: string, body: unknown) => rest(s.url, 'POST', '/api/ping', { key, body });

  test('behavior: org B key pings org B agent', async () => {
    expect(orgB.apiKey).toMatch(/^ak_live_/);
    const r = await ping(orgB.apiKey, { agent_id: orgB.agentId });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ ok: true, agent_id: orgB.agentId, agent_name: orgB.agentName, org_id: orgB.orgId, status: 'active' });
  });

  test('error: org B key pinging an org A agent gets exactly the unknown-agent 400', async () => {
    const unknown = await ping(orgB.apiKey, { agent_id: 'agt_doesnotexist0000' });
    const foreign = await ping(orgB.apiKey, { agent_id: s.bootstrap.agent_id });
    expect(unknown.status).toBe(400);
    expect(unknown.json).toEqual({ error: expect.any(String), code: 'missing_agent_id' });
    expect(foreign.status).toBe(unknown.status);
    expect(foreign.text).toBe(unknown.text);
    expect(foreign.headers.get('content-type')).toBe(unknown.headers.get('content-type'));
  });

  test('error: org A key pinging an org B agent gets the unknown-agent 400 too', async () => {
    const unknown = await ping(s.bootstrap.api_key, { agent_id: 'agt_doesnotexist0000' });
    const foreign = await ping(s.bootstrap.api_key, { agent_id: orgB.agentId });
    expect(foreign.status).toBe(400);
    expect(foreign.json).toEqual(unknown.json);
  });

  test('error: a cross-organization ping records nothing and leaves lastPingAt unset', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'untouched');
    const r = await ping(orgB.apiKey, { agent_id: agentId });
    expect(r.status).toBe(400);
    const txA = await admin.client.listTransactions({ orgId: s.bootstrap.org_id, agentId }, admin.auth);
    const txB = await admin.client.listTransactions({ orgId: orgB.orgId, agentId }, admin.auth);
    expect(txA.transactions).toEqual([]);
    expect(txB.transactions).toEqual([]);
    const agent = await admin.client.getAgent({ agentId }, admin.auth);
    expect(agent.agent!.lastPingAt).toBeUndefined();
  });

  test('error: a revoked agent gets exactly the unknown-agent 400', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'to-be-revoked');
    expect((await ping(s.bootstrap.api_key, { agent_id: agentId })).status).toBe(200);
    await admin.client.updateAgent({ agentId, status: AgentStatus.REVOKED }, admin.auth);
    const unknown = await ping(s.bootstrap.api_key, { agent_id: 'agt_doesnotexist0000' });
    const revoked = await ping(s.bootstrap.api_key, { agent_id: agentId });
    expect(revoked.status).toBe(400);
    expect(revoked.text).toBe(unknown.text);
    const tx = await admin.client.listTransactions({ orgId: s.bootstrap.org_id, agentId }, admin.auth);
    expect(tx.transactions).toHaveLength(1);
  });

  test('error: a malformed agent id gets the unknown-agent 400', async () => {
    const unknown = await ping(s.bootstrap.api_key, { agent_id: 'agt_doesnotexist0000' });
    for (const agent_id of ['agt_', 'AGT_DOESNOTEXIST0000', 'org_doesnotexist0000', "agt_x' OR 1=1 --", ' '.repeat(3), `agt_${'a'.repeat(65)}`]) {
      const r = await ping(s.bootstrap.api_key, { agent_id });
      expect(r.status).toBe(400);
      expect(r.json).toEqual(unknown.json);
    }
  });

  test('error: missing agent_id answers 400 missing_agent_id', async () => {
    const r = await ping(s.bootstrap.api_key, {});
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: expect.any(String), code: 'missing_agent_id' });
  });

  test('error: an empty agent_id answers 400 missing_agent_id', async () => {
    const r = await ping(s.bootstrap.api_key, { agent_id: '' });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: expect.any(String), code: 'missing_agent_id' });
  });

  test('error: a non-string agent_id answers 400 invalid_argument naming agent_id', async () => {
    for (const agent_id of [123, true, null, [s.bootstrap.agent_id], { id: s.bootstrap.agent_id }]) {
      const r = await ping(s.bootstrap.api_key, { agent_id });
      expect.soft(r.status, JSON.stringify(agent_id)).toBe(400);
      expect(r.json, JSON.stringify(agent_id)).toEqual({ error: expect.stringContaining('agent_id'), code: 'invalid_argument' });
    }
  });
});

describe('GET /api/approvals/{id}/status organization isolation', () => {
  /** An approval request of org A: an allowlisted payment above the approval threshold. */
  async function pendingApprovalOfOrgA(): Promise<string> {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'approval-bot');
    const recipient = `0x${'22'.repeat(20)}`;
    await admin.client.setPolicy({ agentId, allowlist: [recipient], spendCapUsd: '100', approvalThresholdUsd: '1' }, admin.auth);
    const r = await rest(s.url, 'POST', '/api/sign', {
      key: s.bootstrap.api_key,
      body: { agent_id: agentId, type: 'raw_transaction', recipient_address: recipient, amount_usd: 5 },
    });
    expect(r.status).toBe(202);
    expect(r.json.status).toBe('pending_approval');
    return r.json.approval_request_id as string;
  }

  test('behavior: the owning organization reads its approval', async () => {
    const id = await pendingApprovalOfOrgA();
    const r = await rest(s.url, 'GET', `/api/approvals/${id}/status`, { key: s.bootstrap.api_key });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ status: 'pending', decided_at: null });
  });

  test('error: another organization gets exactly the unknown-approval 404', async () => {
    const id = await pendingApprovalOfOrgA();
    const foreign = await rest(s.url, 'GET', `/api/approvals/${id}/status`, { key: orgB.apiKey });
    const unknown = await rest(s.url, 'GET', `/api/approvals/${APPROVAL_ID}/status`, { key: orgB.apiKey });
    expect(foreign.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(foreign.text).toBe(unknown.text);
    expect(foreign.text).not.toContain(id);
  });

  test('error: a revoked key cannot read an approval it could read before', async () => {
    const id = await pendingApprovalOfOrgA();
    const k = await createKey(admin, s.bootstrap.org_id, 'test', 'approval-reader');
    expect((await rest(s.url, 'GET', `/api/approvals/${id}/status`, { key: k.plaintext })).status).toBe(200);
    await admin.client.revokeApiKey({ id: k.id }, admin.auth);
    expect401(await rest(s.url, 'GET', `/api/approvals/${id}/status`, { key: k.plaintext }));
  });
});
