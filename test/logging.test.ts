import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { AdminService, ApiKeyMode } from '../gen/paypolicy/v1/admin_pb.js';
import { PaymentPolicyService } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { expectRpcError } from './helpers/rpc.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

type LogLine = Record<string, unknown> & { msg?: string; reqId?: string };

/**
 * One realistic session against a real server, then assertions over every captured log line.
 * Each HTTP request made here is counted, so the test knows how many request lines to expect.
 */
describe('createLogger (as wired by startPaypolicy)', () => {
  let s: TestServer;
  let lines: LogLine[];
  let requestCount = 0;
  /** x-request-id → what the client saw. */
  const seen = new Map<string, { path: string; status: number }>();
  const secrets: string[] = [];
  const querySecret = `qs-secret-${Date.now().toString(36)}`;

  beforeAll(async () => {
    s = await startTestServer();
    const b = s.bootstrap;
    const masterKeyHex = readFileSync(join(s.dataDir, 'master.key'), 'utf8').trim();
    secrets.push(b.admin_token, b.api_key, masterKeyHex);

    const call = async (method: string, path: string, opts: Parameters<typeof rest>[3] = {}) => {
      requestCount++;
      const r = await rest(s.url, method, path, opts);
      const id = r.headers.get('x-request-id');
      if (id) seen.set(id, { path: path.split('?')[0]!, status: r.status });
      return r;
    };
    const admin = connectClient(AdminService, s.url);
    const adminAuth = { headers: { authorization: `Bearer ${b.admin_token}` } };
    const adminCall = <T>(p: Promise<T>) => {
      requestCount++;
      return p;
    };

    // Health checks (answered before any other work, with no request line) and successful pings and resolves.
    expect((await rest(s.url, 'GET', '/healthz')).status).toBe(200);
    expect((await rest(s.url, 'GET', '/readyz')).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await call('POST', '/api/ping', { key: b.api_key, body: { agent_id: b.agent_id } })).status).toBe(200);
    expect((await call('GET', `/api/resolve?slug=example&slugs=a,b`, { key: b.api_key })).status).toBe(200);
    // Secrets in query parameters the route does not read (a careless client's token or key):
    // refused naming the parameter only, and, like every query string, never logged.
    const refused = await call('GET', `/api/resolve?slug=example&slugs=a,b&token=${querySecret}`, { key: b.api_key });
    expect([refused.status, refused.json?.error]).toEqual([400, 'Unknown query parameter "token" (this endpoint takes slug, slugs)']);
    expect((await call('GET', `/api/resolve?slug=example&api_key=${b.api_key}`, { key: b.api_key })).text).not.toContain(b.api_key);

    // 401s: no header, wrong key, the admin token on REST, a malformed header.
    expect((await call('POST', '/api/ping', { body: { agent_id: b.agent_id } })).status).toBe(401);
    expect((await call('POST', '/api/ping', { key: `ak_test_${'0'.repeat(48)}`, body: { agent_id: b.agent_id } })).status).toBe(401);
    expect((await call('POST', '/api/ping', { key: b.admin_token, body: { agent_id: b.agent_id } })).status).toBe(401);
    expect((await call('GET', '/api/resolve?slug=x', { headers: { authorization: `Token ${b.api_key}` } })).status).toBe(401);

    // Other errors: bad JSON, unknown agent, unknown route, wrong method, a rejected sign body.
    expect((await call('POST', '/api/ping', { key: b.api_key, rawBody: `{"agent_id": "${b.admin_token}"`, headers: { 'content-type': 'application/json' } })).status).toBe(400);
    expect((await call('POST', '/api/ping', { key: b.api_key, body: { agent_id: 'agt_000000000000000000000000' } })).status).toBe(400);
    expect((await call('GET', '/api/nope', { key: b.api_key })).status).toBe(404);
    expect((await call('GET', '/api/ping', { key: b.api_key })).status).toBe(405);
    // A body no signing endpoint accepts, carrying key-shaped material that must not be echoed.
    expect((await call('POST', '/api/sign', { key: b.api_key, body: { private_key: masterKeyHex } })).status).toBeGreaterThanOrEqual(400);

    // Admin session: new keys (their plaintext must never be logged), a new treasury, errors.
    const live = await adminCall(admin.createApiKey({ orgId: b.org_id, mode: ApiKeyMode.LIVE, label: 'live' }, adminAuth));
    const test = await adminCall(admin.createApiKey({ orgId: b.org_id, mode: ApiKeyMode.TEST, label: 'test' }, adminAuth));
    secrets.push(live.plaintextKey, test.plaintextKey);
    expect((await call('POST', '/api/ping', { key: live.plaintextKey, body: { agent_id: b.agent_id } })).status).toBe(200);
    const org = await adminCall(admin.createOrganization({ name: 'second' }, adminAuth));
    await adminCall(admin.provisionTreasury({ orgId: org.organization!.id }, adminAuth));
    await adminCall(admin.revokeApiKey({ id: test.apiKey!.id }, adminAuth));
    expect((await call('POST', '/api/ping', { key: test.plaintextKey, body: { agent_id: b.agent_id } })).status).toBe(401);
    requestCount++;
    await expectRpcError(admin.listOrganizations({}, { headers: { authorization: `Bearer ${b.admin_token}x` } }), Code.Unauthenticated);
    requestCount++;
    await expectRpcError(admin.setPolicy({ agentId: b.agent_id, allowlist: [], spendCapUsd: '-1', approvalThresholdUsd: '1' }, adminAuth), Code.InvalidArgument);
    requestCount++;
    await expectRpcError(admin.listTransactions({ orgId: b.org_id, pageToken: b.api_key }, adminAuth), Code.InvalidArgument);

    // gRPC: one good ping, one admin call without a token.
    const ch = grpcChannel(s.url);
    requestCount++;
    const g = await grpcUnary(ch, PaymentPolicyService, PaymentPolicyService.method.ping, { agentId: b.agent_id }, live.plaintextKey);
    expect(g.ok).toBe(true);
    requestCount++;
    const denied = await grpcUnary(ch, AdminService, AdminService.method.listOrganizations, {});
    expect(denied.ok).toBe(false);
    ch.close();

    // Request lines are written when each response finishes; wait for the last one.
    await vi.waitFor(() => expect(s.logs.filter((l) => l.includes('"msg":"request"')).length).toBeGreaterThanOrEqual(requestCount));
    lines = s.logs.map((l) => JSON.parse(l) as LogLine);
  });
  afterAll(async () => s.close());

  test('behavior: every log line is one JSON object from the paypolicy service', () => {
    expect(s.logs.length).toBeGreaterThan(requestCount);
    for (const raw of s.logs) {
      expect(raw.endsWith('\n')).toBe(true);
      expect(raw.trimEnd()).not.toContain('\n');
    }
    for (const l of lines) expect(l).toMatchObject({ service: 'paypolicy', msg: expect.any(String), level: expect.any(Number) });
  });

  test('behavior: no line contains the admin token, an API key, or the master key', () => {
    expect(secrets.length).toBe(5);
    for (const raw of s.logs) {
      for (const secret of secrets) {
        expect(raw).not.toContain(secret);
        // Nor the random part alone (a prefix-stripping serializer would still leak it).
        expect(raw).not.toContain(secret.replace(/^(ppadm_|ak_(live|test)_)/, ''));
      }
    }
  });

  test('behavior: no line contains a 64-hex-digit string (private keys, master key, hashes)', () => {
    // No public value in this session is 64 hex digits long: addresses have 40, ids 24,
    // request ids are dashed UUIDs. So any such run can only be key material or a hash of it.
    for (const raw of s.logs) expect(raw).not.toMatch(/[0-9a-fA-F]{64}/);
  });

  test('behavior: no line carries an Authorization value', () => {
    for (const raw of s.logs) {
      expect(raw).not.toMatch(/bearer/i);
      expect(raw).not.toMatch(/"authorization"\s*:/i);
      expect(raw).not.toMatch(/"headers"\s*:/i);
    }
  });

  test('behavior: each request produced exactly one request line with reqId, method, path and status', () => {
    const requests = lines.filter((l) => l.msg === 'request');
    expect(requests).toHaveLength(requestCount);
    for (const r of requests) {
      expect(r).toMatchObject({ reqId: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/), method: expect.stringMatching(/^(GET|POST)$/), path: expect.stringMatching(/^\//), status: expect.any(Number) });
      expect(typeof r.ms).toBe('number');
    }
    const ids = requests.map((r) => r.reqId);
    expect(new Set(ids).size).toBe(ids.length);
    // The id the client saw in x-request-id names the line for its request.
    expect(seen.size).toBeGreaterThan(10);
    for (const [id, outcome] of seen) {
      expect(requests.filter((r) => r.reqId === id)).toEqual([expect.objectContaining({ path: outcome.path, status: outcome.status })]);
    }
    // Lines logged inside a request (errors) carry a reqId that belongs to a request line.
    for (const l of lines) if (l.reqId !== undefined) expect(ids).toContain(l.reqId);
  });

  test('behavior: RPC request lines name the procedure; gRPC and Connect both appear', () => {
    const requests = lines.filter((l) => l.msg === 'request');
    const rpc = requests.filter((r) => String(r.path).startsWith('/paypolicy.v1.'));
    expect(rpc.map((r) => r.path)).toEqual(expect.arrayContaining(['/paypolicy.v1.AdminService/CreateApiKey', '/paypolicy.v1.PaymentPolicyService/Ping']));
    expect(rpc.some((r) => r.httpVersion === '2.0')).toBe(true);
    expect(rpc.some((r) => r.httpVersion === '1.1')).toBe(true);
  });

  test('behavior: the query string is not logged', () => {
    for (const raw of s.logs) {
      expect(raw).not.toContain(querySecret);
      expect(raw).not.toContain('slugs=');
    }
    for (const l of lines) if (l.msg === 'request') expect(String(l.path)).not.toContain('?');
    expect(lines.filter((l) => l.msg === 'request' && l.path === '/api/resolve')).toHaveLength(4);
  });
});
