import type { Client as GrpcClient } from '@grpc/grpc-js';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { Code, type Client } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService, PaymentType } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createKey, type Admin } from './helpers/admin.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { bearer, expectRpcError } from './helpers/rpc.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * An agent RPC's API key is authenticated once, at admission (its organization's share of the
 * gate), and the handler takes that principal instead of hashing and looking the key up again. A
 * key that does not authenticate there still gets the handler's own 401, and a revoked key fails
 * on the very next call, over Connect and over gRPC alike.
 */

let s: TestServer;
let admin: Admin;
let connect: Client<typeof PaymentPolicyService>;
let grpc: GrpcClient;

const M = PaymentPolicyService.method;

beforeAll(async () => {
  s = await startTestServer();
  admin = adminFor(s);
  connect = connectClient(PaymentPolicyService, s.url);
  grpc = grpcChannel(s.url);
});
afterAll(async () => {
  grpc?.close();
  await s?.close();
});

describe('agent RPC authentication', () => {
  test('behavior: a valid key answers on Connect and gRPC', async () => {
    const ping = await connect.ping({ agentId: s.bootstrap.agent_id }, bearer(s.bootstrap.api_key));
    expect(ping.ok).toBe(true);
    const g = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: s.bootstrap.agent_id }, s.bootstrap.api_key);
    expect(g.ok && g.message.ok).toBe(true);
  });

  test('error: unauthenticated: an unknown and a malformed key get the handler\'s 401 on Connect and gRPC', async () => {
    const unknown = `ak_test_${'0'.repeat(48)}`;
    const e = await expectRpcError(connect.sign({ agentId: s.bootstrap.agent_id, type: PaymentType.EIP3009 }, bearer(unknown)), Code.Unauthenticated, /^Invalid or revoked API key$/);
    expect(e.metadata.get('x-error-code')).toBe('unauthenticated');
    await expectRpcError(connect.ping({ agentId: s.bootstrap.agent_id }, bearer('nope')), Code.Unauthenticated, /^Malformed API key$/);
    const g = await grpcUnary(grpc, PaymentPolicyService, M.sign, { agentId: s.bootstrap.agent_id }, unknown);
    expect(g).toMatchObject({ ok: false, code: GrpcStatus.UNAUTHENTICATED, details: 'Invalid or revoked API key' });
  });

  test('error: unauthenticated: a key revoked through RevokeApiKey fails on the very next call, on both transports', async () => {
    const key = await createKey(admin, s.bootstrap.org_id, 'test', 'short-lived');
    expect((await connect.ping({ agentId: s.bootstrap.agent_id }, bearer(key.plaintext))).ok).toBe(true);
    expect((await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: s.bootstrap.agent_id }, key.plaintext)).ok).toBe(true);
    await admin.client.revokeApiKey({ id: key.id }, admin.auth);
    await expectRpcError(connect.ping({ agentId: s.bootstrap.agent_id }, bearer(key.plaintext)), Code.Unauthenticated, /^Invalid or revoked API key$/);
    await expectRpcError(connect.sign({ agentId: s.bootstrap.agent_id, type: PaymentType.EIP3009 }, bearer(key.plaintext)), Code.Unauthenticated);
    const g = await grpcUnary(grpc, PaymentPolicyService, M.ping, { agentId: s.bootstrap.agent_id }, key.plaintext);
    expect(g).toMatchObject({ ok: false, code: GrpcStatus.UNAUTHENTICATED, details: 'Invalid or revoked API key' });
  });
});
