import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { grpcChannel, grpcUnary } from './helpers/clients.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

describe('startPaypolicy', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s.close());

  test('behavior: REST ping and gRPC ping answer from one port', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ ok: true, agent_id: s.bootstrap.agent_id, agent_name: 'demo-agent', org_id: s.bootstrap.org_id, status: 'active' });
    const ch = grpcChannel(s.url);
    const g = await grpcUnary(ch, PaymentPolicyService, PaymentPolicyService.method.ping, { agentId: s.bootstrap.agent_id }, s.bootstrap.api_key);
    ch.close();
    expect(g.ok && g.message.agentName).toBe('demo-agent');
  });
});
