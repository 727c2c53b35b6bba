import * as grpc from '@grpc/grpc-js';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AgentStatus, PaymentPolicyService } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createTenant, type Admin } from './helpers/admin.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { postSign, setPolicy } from './helpers/payments.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

/**
 * GET /api/agents/{id}/spend, the extension beyond the wire protocol that lets an agent (and the
 * client's `spend_status` MCP tool) read its own remaining budget: golden JSON, the same sums the
 * cap check uses, and the organization scope (another organization's agent is an unknown one).
 */

const T0 = Date.parse('2030-01-02T03:04:05.678Z');
const RECIPIENT = '0x2222222222222222222222222222222222222222';

let s: TestServer;
let admin: Admin;
let clock = T0;

beforeAll(async () => {
  s = await startTestServer({ now: () => clock, logLevel: 'warn' });
  admin = adminFor(s);
  await setPolicy(admin, s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '1' });
});
afterAll(async () => s?.close());

const spend = (agentId: string, key = s.bootstrap.api_key) =>
  rest(s.url, 'GET', `/api/agents/${encodeURIComponent(agentId)}/spend`, { key, headers: { connection: 'close' } });

function sign(amount: string) {
  return postSign(s.url, s.bootstrap.api_key, { agent_id: s.bootstrap.agent_id, type: 'eip3009', chain_id: 84532, recipient_address: RECIPIENT, amount_usd: amount });
}

describe('getAgentSpend (GET /api/agents/{id}/spend)', () => {
  test('behavior: a fresh agent has its whole cap left; exact body and field order', async () => {
    const r = await spend(s.bootstrap.agent_id);
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.text).toBe(JSON.stringify({
      agent_id: s.bootstrap.agent_id, agent_name: 'demo-agent', status: 'active', window_hours: 24,
      spend_cap_usd: '10', committed_usd: '0', remaining_usd: '10', approval_threshold_usd: '1', as_of: '2030-01-02T03:04:05.678Z',
      limits: [{
        window: '24h', scope: 'agent', recipient: null, max_usd: '10', spent_usd: '0', remaining_usd: '10', max_count: null, count: 0,
        max_network_fee_wei: null, network_fee_wei: '0',
      }],
    }));
  });

  test('behavior: signed and pending payments count; denied ones do not; the rolling window lets them go', async () => {
    expect((await sign('0.25')).status).toBe(200);
    expect((await sign('5')).status).toBe(202); // pending approval holds the cap too
    expect((await sign('9')).status).toBe(403); // over the cap: denied, holds nothing
    const r = await spend(s.bootstrap.agent_id);
    expect(r.json).toMatchObject({ committed_usd: '5.25', remaining_usd: '4.75' });
    // The sum is the one the policy check compares with the cap: $4.75 is allowed, $4.76 is not.
    const dry = (amount: string) => postSign(s.url, s.bootstrap.api_key, {
      agent_id: s.bootstrap.agent_id, type: 'eip3009', chain_id: 84532, recipient_address: RECIPIENT, amount_usd: amount, dry_run: true,
    });
    expect((await dry('0.75')).json.status).toBe('allowed');
    expect((await dry('4.76')).json.status).toBe('denied');
    clock = T0 + 24 * 3600_000 + 1;
    // The pending approval has expired by now, and the signed payment left the window.
    expect((await spend(s.bootstrap.agent_id)).json).toMatchObject({ committed_usd: '0', remaining_usd: '10', as_of: new Date(clock).toISOString() });
  });

  test('behavior: remaining is never negative after the cap is lowered below what is committed', async () => {
    clock = T0 + 2 * 24 * 3600_000;
    expect((await sign('0.5')).status).toBe(200);
    await setPolicy(admin, s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '0.1', thresholdUsd: '1' });
    expect((await spend(s.bootstrap.agent_id)).json).toMatchObject({ spend_cap_usd: '0.1', committed_usd: '0.5', remaining_usd: '0' });
  });

  test('error: not_found: another organization\'s agent answers exactly like an unknown one', async () => {
    const other = await createTenant(admin, 'spend-other');
    const foreign = await spend(other.agentId);
    const unknown = await spend('agt_00000000000000000000000000000000');
    const malformed = await spend('not-an-agent');
    for (const r of [foreign, unknown, malformed]) {
      expect(r.status).toBe(404);
      expect(r.json).toEqual({ error: 'Agent not found', code: 'agent_not_found' });
    }
    // Its own key reads it.
    expect((await spend(other.agentId, other.apiKey)).json).toMatchObject({ agent_id: other.agentId, spend_cap_usd: '0', remaining_usd: '0' });
  });

  test('error: unauthenticated without a valid key; 405 for other methods', async () => {
    expect((await spend(s.bootstrap.agent_id, 'ak_test_' + '0'.repeat(48))).status).toBe(401);
    const r = await rest(s.url, 'POST', `/api/agents/${s.bootstrap.agent_id}/spend`, { key: s.bootstrap.api_key, body: {} });
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('GET, HEAD');
  });

  test('behavior: HEAD answers as GET does, with the same status and headers and no body', async () => {
    const path = `/api/agents/${s.bootstrap.agent_id}/spend`;
    const get = await rest(s.url, 'GET', path, { key: s.bootstrap.api_key });
    const head = await rest(s.url, 'HEAD', path, { key: s.bootstrap.api_key });
    expect(get.status).toBe(200);
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'));
    expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(get.text)));
    // Unauthenticated, HEAD is refused like GET.
    expect((await rest(s.url, 'HEAD', path)).status).toBe(401);
  });
});

describe('PaymentPolicyService.GetAgentSpend (the same read over Connect and gRPC)', () => {
  test('behavior: Connect JSON and gRPC answer the same numbers as REST, from the same use case', async () => {
    const connect = connectClient(PaymentPolicyService, s.url);
    const viaConnect = await connect.getAgentSpend({ agentId: s.bootstrap.agent_id }, { headers: { authorization: `Bearer ${s.bootstrap.api_key}` } });
    const channel = grpcChannel(s.url);
    try {
      const viaGrpc = await grpcUnary(channel, PaymentPolicyService, PaymentPolicyService.method.getAgentSpend, { agentId: s.bootstrap.agent_id }, s.bootstrap.api_key);
      expect(viaGrpc.ok).toBe(true);
      const restBody = (await spend(s.bootstrap.agent_id)).json as Record<string, unknown>;
      for (const m of [viaConnect, (viaGrpc as { message: typeof viaConnect }).message]) {
        expect({
          agent_id: m.agentId, agent_name: m.agentName, status: m.status, window_hours: m.windowHours, spend_cap_usd: m.spendCapUsd,
          committed_usd: m.committedUsd, remaining_usd: m.remainingUsd, approval_threshold_usd: m.approvalThresholdUsd,
          as_of: new Date(timestampMs(m.asOf!)).toISOString(),
          limits: m.limits.map((l) => ({
            window: l.window, scope: l.scope, recipient: l.recipient ?? null, max_usd: l.maxUsd ?? null, spent_usd: l.spentUsd,
            remaining_usd: l.remainingUsd ?? null, max_count: l.maxCount ?? null, count: l.count, max_network_fee_wei: l.maxNetworkFeeWei ?? null,
            network_fee_wei: l.networkFeeWei,
          })),
        }).toEqual({ ...restBody, status: AgentStatus.ACTIVE });
      }
      // Another organization's agent is unknown on RPC too.
      const other = await createTenant(admin, 'spend-rpc-other');
      const refused = await grpcUnary(channel, PaymentPolicyService, PaymentPolicyService.method.getAgentSpend, { agentId: other.agentId }, s.bootstrap.api_key);
      expect(refused).toMatchObject({ ok: false, code: grpc.status.NOT_FOUND });
    } finally {
      channel.close();
    }
  });
});
