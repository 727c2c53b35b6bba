import type { Client as GrpcClient } from '@grpc/grpc-js';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { MessageShape } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TransactionStatus } from '../gen/paypolicy/v1/admin_pb.js';
import { PaymentPolicyService, AgentStatus } from '../gen/paypolicy/v1/payment_policy_pb.js';
import type { ResolveResponseSchema } from '../gen/paypolicy/v1/payment_policy_pb.js';
import type { ServiceRecordSchema } from '../gen/paypolicy/v1/registry_pb.js';
import { adminFor, createAgent, createTenant, upsertService, type Admin, type Tenant } from './helpers/admin.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { grpcWebUnary } from './helpers/grpcWeb.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

/**
 * REST, Connect JSON, gRPC and gRPC-Web reach the same use cases, so the same input must give
 * the same answer and the same error on every transport.
 */

let s: TestServer;
let admin: Admin;
let connect: Client<typeof PaymentPolicyService>;
let grpc: GrpcClient;
let other: Tenant;
let pausedAgentId: string;

const SERVICE = PaymentPolicyService.typeName;
const M = PaymentPolicyService.method;

const bearer = (key: string) => ({ headers: { authorization: `Bearer ${key}` } });

/** Awaits a call that must fail and returns its ConnectError. */
async function connectError(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return err as ConnectError;
  }
  throw new Error('expected the call to fail');
}

/** An RPC ServiceRecord written in the REST shape, field by field (unset priceAtomic is null). */
function restShapeOf(r: MessageShape<typeof ServiceRecordSchema>) {
  return {
    id: r.id,
    slug: r.slug,
    name: r.name,
    description: r.description,
    category: r.category,
    logoUrl: r.logoUrl,
    docsUrl: r.docsUrl,
    paymentMethods: r.paymentMethods.map((m) => ({ realm: m.realm, baseUrl: m.baseUrl, protocol: m.protocol })),
    endpoints: r.endpoints.map((e) => ({
      method: e.method,
      path: e.path,
      description: e.description,
      priceAtomic: e.priceAtomic ?? null,
      currency: e.currency,
      pricingModel: e.pricingModel,
      protocol: e.protocol,
    })),
  };
}

/** A ResolveResponse written as the REST body. */
function restBodyOf(r: MessageShape<typeof ResolveResponseSchema>) {
  return {
    results: Object.fromEntries(r.results.map((x) => [x.slug, x.service ? restShapeOf(x.service) : null])),
    resolvedCount: r.resolvedCount,
    unresolvedCount: r.unresolvedCount,
  };
}

beforeAll(async () => {
  s = await startTestServer();
  admin = adminFor(s);
  connect = connectClient(PaymentPolicyService, s.url);
  grpc = grpcChannel(s.url);
  other = await createTenant(admin, 'other-org');
  pausedAgentId = await createAgent(admin, s.bootstrap.org_id, 'sleepy');
  await admin.client.updateAgent({ agentId: pausedAgentId, status: AgentStatus.PAUSED }, admin.auth);
  await upsertService(admin, {
    slug: 'maps-api',
    name: 'Maps',
    description: 'Tiles and routes',
    category: 'geo',
    logoUrl: 'https://maps.example.com/logo.svg',
    docsUrl: 'https://maps.example.com/docs',
    paymentMethods: [{ realm: 'maps.example.com', baseUrl: 'https://maps.example.com', protocol: 'mpp' }],
    endpoints: [
      { method: 'GET', path: '/tiles', description: 'A tile', priceAtomic: '250', currency: 'USDC', pricingModel: 'per_request', protocol: 'mpp' },
      { method: 'POST', path: '/route', description: 'A route', currency: 'USDC', pricingModel: 'dynamic', protocol: 'mpp' },
    ],
  });
  await upsertService(admin, { slug: 'bare-api', name: 'Bare', paymentMethods: [{ protocol: 'x402' }] });
});
afterAll(async () => {
  grpc?.close();
  await s.close();
});

describe('PaymentPolicyService.Ping', () => {
  test('behavior: Connect JSON answers field for field like REST', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
    const c = await connect.ping({ agentId: s.bootstrap.agent_id }, bearer(s.bootstrap.api_key));
    expect(r.status).toBe(200);
    expect(c.ok).toBe(r.json.ok);
    expect(c.agentId).toBe(r.json.agent_id);
    expect(c.agentName).toBe(r.json.agent_name);
    expect(c.orgId).toBe(r.json.org_id);
    // The REST status is the enum value's name: AGENT_STATUS_ACTIVE is `active`.
    expect(AgentStatus[c.status].toLowerCase()).toBe(r.json.status);
    expect(c.ok).toBe(true);
  });

  test('behavior: gRPC answers field for field like REST', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
    const g = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: s.bootstrap.agent_id }, s.bootstrap.api_key);
    if (!g.ok) throw new Error(`gRPC ping failed: ${g.code} ${g.details}`);
    expect(g.message.ok).toBe(r.json.ok);
    expect(g.message.agentId).toBe(r.json.agent_id);
    expect(g.message.agentName).toBe(r.json.agent_name);
    expect(g.message.orgId).toBe(r.json.org_id);
    expect(AgentStatus[g.message.status].toLowerCase()).toBe(r.json.status);
  });

  test('behavior: gRPC-Web answers field for field like REST', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
    const w = await grpcWebUnary(s.url, SERVICE, M.ping, { agentId: s.bootstrap.agent_id }, s.bootstrap.api_key);
    expect(w.httpStatus).toBe(200);
    expect(w.headers.get('content-type')).toMatch(/^application\/grpc-web\+proto/);
    expect(w.grpcStatus).toBe(0);
    expect(w.message).toBeDefined();
    expect(w.message!.ok).toBe(r.json.ok);
    expect(w.message!.agentId).toBe(r.json.agent_id);
    expect(w.message!.agentName).toBe(r.json.agent_name);
    expect(w.message!.orgId).toBe(r.json.org_id);
    expect(AgentStatus[w.message!.status].toLowerCase()).toBe(r.json.status);
  });

  test('behavior: a paused agent reports paused on every transport', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: pausedAgentId } });
    const c = await connect.ping({ agentId: pausedAgentId }, bearer(s.bootstrap.api_key));
    const g = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: pausedAgentId }, s.bootstrap.api_key);
    expect(r.json.status).toBe('paused');
    expect(c.status).toBe(AgentStatus.PAUSED);
    expect(g.ok && g.message.status).toBe(AgentStatus.PAUSED);
  });

  test('behavior: a ping over any transport is recorded in the ledger', async () => {
    // One agent per transport: an agent's pings record at most one row per interval (app/organizations/ping.ts).
    const agents = await Promise.all(['rest', 'connect', 'grpc', 'grpc-web'].map((t) => createAgent(admin, s.bootstrap.org_id, `multi-transport-${t}`)));
    await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agents[0] } });
    await connect.ping({ agentId: agents[1]! }, bearer(s.bootstrap.api_key));
    await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: agents[2]! }, s.bootstrap.api_key);
    await grpcWebUnary(s.url, SERVICE, M.ping, { agentId: agents[3]! }, s.bootstrap.api_key);
    for (const agentId of agents) {
      const list = await admin.client.listTransactions({ orgId: s.bootstrap.org_id, agentId }, admin.auth);
      expect(list.transactions.map((t) => `${t.type}/${TransactionStatus[t.status]}/${t.amountUsd}`)).toEqual(['ping/RECORDED/0']);
    }
  });

  test('error: no key is Unauthenticated on Connect and UNAUTHENTICATED (16) on gRPC', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { body: { agent_id: s.bootstrap.agent_id } });
    expect(r.status).toBe(401);
    const c = await connectError(connect.ping({ agentId: s.bootstrap.agent_id }));
    expect(c.code).toBe(Code.Unauthenticated);
    expect(c.rawMessage).toBe(r.json.error);
    expect(c.metadata.get('x-error-code')).toBe('unauthenticated');
    const g = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: s.bootstrap.agent_id });
    expect(g.ok).toBe(false);
    if (g.ok) return;
    expect(g.code).toBe(GrpcStatus.UNAUTHENTICATED);
    expect(g.code).toBe(16);
    expect(g.details).toBe(r.json.error);
    expect(g.metadata.get('x-error-code')).toEqual(['unauthenticated']);
  });

  test('error: an unknown key is unauthenticated on every transport with one message', async () => {
    const unknown = `ak_test_${'ab'.repeat(24)}`;
    const r = await rest(s.url, 'POST', '/api/ping', { key: unknown, body: { agent_id: s.bootstrap.agent_id } });
    expect(r.status).toBe(401);
    const c = await connectError(connect.ping({ agentId: s.bootstrap.agent_id }, bearer(unknown)));
    const g = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: s.bootstrap.agent_id }, unknown);
    expect(c.code).toBe(Code.Unauthenticated);
    expect(c.rawMessage).toBe(r.json.error);
    expect(g.ok ? 0 : g.code).toBe(GrpcStatus.UNAUTHENTICATED);
    expect(g.ok ? '' : g.details).toBe(r.json.error);
  });

  test('error: a malformed Authorization header is unauthenticated on Connect and gRPC', async () => {
    const c = await connectError(connect.ping({ agentId: s.bootstrap.agent_id }, { headers: { authorization: 'Basic dXNlcjpwYXNz' } }));
    expect(c.code).toBe(Code.Unauthenticated);
    const g = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: s.bootstrap.agent_id }, 'ak_prod_0123');
    expect(g.ok ? 0 : g.code).toBe(GrpcStatus.UNAUTHENTICATED);
  });

  test('error: missing agent is INVALID_ARGUMENT with x-error-code missing_agent_id', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: {} });
    expect(r.status).toBe(400);
    const c = await connectError(connect.ping({}, bearer(s.bootstrap.api_key)));
    expect(c.code).toBe(Code.InvalidArgument);
    expect(c.rawMessage).toBe(r.json.error);
    expect(c.metadata.get('x-error-code')).toBe(r.json.code);
    const g = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: '' }, s.bootstrap.api_key);
    if (g.ok) throw new Error('expected failure');
    expect(g.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(g.details).toBe(r.json.error);
    expect(g.metadata.get('x-error-code')).toEqual(['missing_agent_id']);
  });

  test('error: unknown agent is INVALID_ARGUMENT with the same text as REST', async () => {
    const agentId = 'agt_zzzzzzzzzzzzzzzz';
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: agentId } });
    expect(r.status).toBe(400);
    const c = await connectError(connect.ping({ agentId }, bearer(s.bootstrap.api_key)));
    expect(c.code).toBe(Code.InvalidArgument);
    expect(c.rawMessage).toBe(r.json.error);
    expect(c.metadata.get('x-error-code')).toBe('missing_agent_id');
    const g = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId }, s.bootstrap.api_key);
    if (g.ok) throw new Error('expected failure');
    expect(g.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(g.details).toBe(r.json.error);
  });

  test('error: another organization agent looks exactly like an unknown agent on Connect and gRPC', async () => {
    const unknown = await connectError(connect.ping({ agentId: 'agt_zzzzzzzzzzzzzzzz' }, bearer(s.bootstrap.api_key)));
    const foreign = await connectError(connect.ping({ agentId: other.agentId }, bearer(s.bootstrap.api_key)));
    expect(foreign.code).toBe(unknown.code);
    expect(foreign.rawMessage).toBe(unknown.rawMessage);
    expect(foreign.metadata.get('x-error-code')).toBe(unknown.metadata.get('x-error-code'));
    const g1 = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: 'agt_zzzzzzzzzzzzzzzz' }, other.apiKey);
    const g2 = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: s.bootstrap.agent_id }, other.apiKey);
    if (g1.ok || g2.ok) throw new Error('expected failures');
    expect([g2.code, g2.details]).toEqual([g1.code, g1.details]);
  });
});

describe('PaymentPolicyService.Resolve', () => {
  const slugs = ['maps-api', ' bare-api , nope-api', 'maps-api', '__proto__'];
  const query = `?slug=${encodeURIComponent(slugs[0]!)}&slugs=${slugs.slice(1).map(encodeURIComponent).join(',')}`;

  test('behavior: Connect JSON answers field for field like REST', async () => {
    const r = await rest(s.url, 'GET', `/api/resolve${query}`, { key: s.bootstrap.api_key });
    expect(r.status).toBe(200);
    const c = await connect.resolve({ slugs }, bearer(s.bootstrap.api_key));
    expect(c.results.map((x) => x.slug)).toEqual(Object.keys(r.json.results));
    expect(c.results.map((x) => x.slug)).toEqual(['maps-api', 'bare-api', 'nope-api', '__proto__']);
    expect(restBodyOf(c)).toEqual(r.json);
    expect(c.resolvedCount).toBe(2);
    expect(c.unresolvedCount).toBe(2);
  });

  test('behavior: gRPC answers field for field like REST', async () => {
    const r = await rest(s.url, 'GET', `/api/resolve${query}`, { key: s.bootstrap.api_key });
    const g = await grpcUnary(grpc, PaymentPolicyService, M.resolve, { slugs }, s.bootstrap.api_key);
    if (!g.ok) throw new Error(`gRPC resolve failed: ${g.code} ${g.details}`);
    expect(g.message.results.map((x) => x.slug)).toEqual(Object.keys(r.json.results));
    expect(restBodyOf(g.message)).toEqual(r.json);
  });

  test('behavior: gRPC-Web answers like REST', async () => {
    const r = await rest(s.url, 'GET', '/api/resolve?slugs=maps-api,nope-api', { key: s.bootstrap.api_key });
    const w = await grpcWebUnary(s.url, SERVICE, M.resolve, { slugs: ['maps-api,nope-api'] }, s.bootstrap.api_key);
    expect(w.grpcStatus).toBe(0);
    expect(restBodyOf(w.message!)).toEqual(r.json);
  });

  test('behavior: an unset price on RPC is null on REST and a set price is the same string', async () => {
    const c = await connect.resolve({ slugs: ['maps-api'] }, bearer(s.bootstrap.api_key));
    const endpoints = c.results[0]!.service!.endpoints;
    expect(endpoints[0]!.priceAtomic).toBe('250');
    expect(endpoints[1]!.priceAtomic).toBeUndefined();
    const r = await rest(s.url, 'GET', '/api/resolve?slug=maps-api', { key: s.bootstrap.api_key });
    expect(r.json.results['maps-api'].endpoints.map((e: { priceAtomic: unknown }) => e.priceAtomic)).toEqual(['250', null]);
  });

  test('error: no slugs is INVALID_ARGUMENT with x-error-code slug_required on every transport', async () => {
    const r = await rest(s.url, 'GET', '/api/resolve', { key: s.bootstrap.api_key });
    expect(r.status).toBe(400);
    const c = await connectError(connect.resolve({ slugs: [] }, bearer(s.bootstrap.api_key)));
    expect(c.code).toBe(Code.InvalidArgument);
    expect(c.rawMessage).toBe(r.json.error);
    expect(c.metadata.get('x-error-code')).toBe('slug_required');
    const g = await grpcUnary(grpc, PaymentPolicyService, M.resolve, { slugs: [] }, s.bootstrap.api_key);
    if (g.ok) throw new Error('expected failure');
    expect(g.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(g.details).toBe(r.json.error);
    expect(g.metadata.get('x-error-code')).toEqual(['slug_required']);
  });

  test('error: only blank slugs is INVALID_ARGUMENT like REST', async () => {
    const r = await rest(s.url, 'GET', `/api/resolve?slugs=${encodeURIComponent(',, ,')}`, { key: s.bootstrap.api_key });
    const c = await connectError(connect.resolve({ slugs: ['', ' , ,'] }, bearer(s.bootstrap.api_key)));
    const g = await grpcUnary(grpc, PaymentPolicyService, M.resolve, { slugs: [' ', ','] }, s.bootstrap.api_key);
    expect(r.status).toBe(400);
    expect(c.code).toBe(Code.InvalidArgument);
    expect(c.rawMessage).toBe(r.json.error);
    expect(g.ok ? 0 : g.code).toBe(GrpcStatus.INVALID_ARGUMENT);
  });

  test('error: too many slugs is INVALID_ARGUMENT with x-error-code too_many_slugs', async () => {
    const many = Array.from({ length: 101 }, (_, i) => `s${i}`);
    const c = await connectError(connect.resolve({ slugs: many }, bearer(s.bootstrap.api_key)));
    expect(c.code).toBe(Code.InvalidArgument);
    expect(c.metadata.get('x-error-code')).toBe('too_many_slugs');
    const g = await grpcUnary(grpc, PaymentPolicyService, M.resolve, { slugs: [many.join(',')] }, s.bootstrap.api_key);
    if (g.ok) throw new Error('expected failure');
    expect(g.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(g.metadata.get('x-error-code')).toEqual(['too_many_slugs']);
  });

  test('error: no key is unauthenticated even when the request is invalid', async () => {
    const c = await connectError(connect.resolve({ slugs: [] }));
    expect(c.code).toBe(Code.Unauthenticated);
    const g = await grpcUnary(grpc, PaymentPolicyService, M.resolve, { slugs: ['maps-api'] });
    expect(g.ok ? 0 : g.code).toBe(GrpcStatus.UNAUTHENTICATED);
  });
});

describe('PaymentPolicyService.Sign, Quote and GetApprovalStatus', () => {
  test('error: Sign, Quote and GetApprovalStatus authenticate first on gRPC', async () => {
    const sign = await grpcUnary(grpc, PaymentPolicyService, M.sign, { agentId: s.bootstrap.agent_id });
    const quote = await grpcUnary(grpc, PaymentPolicyService, M.quote, { agentId: s.bootstrap.agent_id, url: 'https://example.com' });
    const approval = await grpcUnary(grpc, PaymentPolicyService, M.getApprovalStatus, { id: '00000000-0000-4000-8000-000000000000' });
    for (const g of [sign, quote, approval]) {
      expect(g.ok ? 0 : g.code).toBe(GrpcStatus.UNAUTHENTICATED);
      expect(g.ok ? [] : g.metadata.get('x-error-code')).toEqual(['unauthenticated']);
    }
  });

  test('error: Sign, Quote and GetApprovalStatus authenticate first on Connect', async () => {
    const unknownLiveKey = `ak_live_${'cd'.repeat(24)}`;
    // One call at a time: started together, a call that fails before the one awaited first
    // (on PostgreSQL, the missing header before the unknown key's lookup) is an unhandled rejection.
    for (const call of [
      () => connect.sign({ agentId: s.bootstrap.agent_id }, bearer(unknownLiveKey)),
      () => connect.quote({ agentId: s.bootstrap.agent_id, url: 'https://example.com' }),
      () => connect.getApprovalStatus({ id: '00000000-0000-4000-8000-000000000000' }, bearer(unknownLiveKey)),
    ]) {
      const e = await connectError(call());
      expect(e.code).toBe(Code.Unauthenticated);
    }
  });
});

describe('gRPC-Web', () => {
  test('error: an unauthenticated call is answered with grpc-status 16', async () => {
    const w = await grpcWebUnary(s.url, SERVICE, M.ping, { agentId: s.bootstrap.agent_id });
    expect(w.httpStatus).toBe(200);
    expect(w.headers.get('content-type')).toMatch(/^application\/grpc-web/);
    expect(w.grpcStatus).toBe(16);
    expect(w.grpcMessage).toBe('Missing Authorization header');
    expect(w.message).toBeUndefined();
  });

  test('error: a missing agent is answered with grpc-status 3 and x-error-code', async () => {
    const w = await grpcWebUnary(s.url, SERVICE, M.ping, { agentId: '' }, s.bootstrap.api_key);
    expect(w.grpcStatus).toBe(3);
    const code = w.trailers['x-error-code'] ?? w.headers.get('x-error-code');
    expect(code).toBe('missing_agent_id');
  });

  test('behavior: another organization key works for its own agent', async () => {
    const w = await grpcWebUnary(s.url, SERVICE, M.ping, { agentId: other.agentId }, other.apiKey);
    expect(w.grpcStatus).toBe(0);
    expect(w.message).toMatchObject({ ok: true, agentId: other.agentId, agentName: other.agentName, orgId: other.orgId, status: AgentStatus.ACTIVE });
  });
});
