import * as grpc from '@grpc/grpc-js';
import { fromBinary } from '@bufbuild/protobuf';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService } from '../gen/paypolicy/v1/admin_pb.js';
import { ErrorInfoSchema, type ErrorInfo } from '../gen/paypolicy/v1/error_pb.js';
import { PaymentPolicyService } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { DomainError } from '../src/domain/errors.js';
import { toConnectError } from '../src/rpc/errors.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { anonymous, bearer, expectRpcError } from './helpers/rpc.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * Every RPC error carries its code as a paypolicy.v1.ErrorInfo detail as well as the x-error-code
 * header: read back by a Connect client (ConnectError.findDetails) and by a real gRPC client
 * (@grpc/grpc-js), whose grpc-status-details-bin trailer is decoded here by hand as the
 * google.rpc.Status it is (1: code, 2: message, 3: repeated google.protobuf.Any).
 */

let s: TestServer;
let channel: grpc.Client;

beforeAll(async () => {
  s = await startTestServer();
  channel = grpcChannel(s.url);
});

afterAll(async () => {
  channel?.close();
  await s?.close();
});

/** google.rpc.Status from its wire bytes: code, message and each Any detail as (type_url, value). */
function decodeStatus(bytes: Uint8Array): { code: number; message: string; details: Array<{ typeUrl: string; value: Uint8Array }> } {
  const r = new BinaryReader(bytes);
  const status = { code: 0, message: '', details: [] as Array<{ typeUrl: string; value: Uint8Array }> };
  while (r.pos < r.len) {
    const [field, wireType] = r.tag();
    if (field === 1) status.code = r.int32();
    else if (field === 2) status.message = r.string();
    else if (field === 3) {
      const any = new BinaryReader(r.bytes());
      const detail: { typeUrl: string; value: Uint8Array } = { typeUrl: '', value: new Uint8Array() };
      while (any.pos < any.len) {
        const [f, w] = any.tag();
        if (f === 1) detail.typeUrl = any.string();
        else if (f === 2) detail.value = any.bytes();
        else any.skip(w);
      }
      status.details.push(detail);
    } else r.skip(wireType);
  }
  return status;
}

/** The ErrorInfo details of a gRPC error, from its grpc-status-details-bin trailer. */
function grpcErrorInfos(md: grpc.Metadata): ErrorInfo[] {
  const raw = md.get('grpc-status-details-bin');
  expect(raw, 'grpc-status-details-bin trailer').toHaveLength(1);
  const status = decodeStatus(raw[0] as Buffer);
  return status.details
    .filter((d) => d.typeUrl === 'type.googleapis.com/paypolicy.v1.ErrorInfo')
    .map((d) => fromBinary(ErrorInfoSchema, d.value));
}

describe('ErrorInfo detail', () => {
  test('error: Connect: a missing agent carries ErrorInfo{reason: missing_agent_id, domain: paypolicy.dev} and the same x-error-code', async () => {
    const client = connectClient(PaymentPolicyService, s.url);
    const err = await expectRpcError(client.ping({ agentId: '' }, bearer(s.bootstrap.api_key)), Code.InvalidArgument);
    const infos = err.findDetails(ErrorInfoSchema);
    expect(infos.map((i) => [i.reason, i.domain, i.metadata])).toEqual([['missing_agent_id', 'paypolicy.dev', {}]]);
    expect(err.metadata.get('x-error-code')).toBe('missing_agent_id');
  });

  test('error: Connect: an admin call without the token carries the code it also sends as x-error-code', async () => {
    const admin = connectClient(AdminService, s.url);
    const err = await expectRpcError(admin.listOrganizations({}, anonymous), Code.Unauthenticated);
    const [info] = err.findDetails(ErrorInfoSchema);
    expect(info?.reason).toBeTruthy();
    expect(info?.reason).toBe(err.metadata.get('x-error-code'));
  });

  test('error: gRPC (@grpc/grpc-js): a missing agent is INVALID_ARGUMENT with ErrorInfo in grpc-status-details-bin', async () => {
    const r = await grpcUnary(channel, PaymentPolicyService, PaymentPolicyService.method.ping, { agentId: '' }, s.bootstrap.api_key);
    if (r.ok) throw new Error('ping without an agent id should fail');
    expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
    const infos = grpcErrorInfos(r.metadata);
    expect(infos.map((i) => [i.reason, i.domain])).toEqual([['missing_agent_id', 'paypolicy.dev']]);
    expect(r.metadata.get('x-error-code')).toEqual(['missing_agent_id']);
  });

  test('error: gRPC: a malformed List page token is INVALID_ARGUMENT with its ErrorInfo', async () => {
    const r = await grpcUnary(channel, AdminService, AdminService.method.listAgents,
      { orgId: s.bootstrap.org_id, pageToken: 'not-a-token' }, s.bootstrap.admin_token);
    if (r.ok) throw new Error('a malformed page token should fail');
    expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(r.details).toBe('page_token is malformed');
    expect(grpcErrorInfos(r.metadata).map((i) => i.reason)).toEqual(['invalid_argument']);
  });

  test('behavior: overloaded tells the caller when to retry in ErrorInfo.metadata; internal errors carry no cause', () => {
    const overloaded = toConnectError(new DomainError('overloaded', 'Server busy'), undefined);
    expect(overloaded.code).toBe(Code.Unavailable);
    expect(overloaded.findDetails(ErrorInfoSchema).map((i) => [i.reason, i.metadata])).toEqual([['overloaded', { retry_after_seconds: '1' }]]);
    const internal = toConnectError(new Error('secret path /var/lib/x'), undefined);
    expect(internal.findDetails(ErrorInfoSchema).map((i) => [i.reason, i.metadata])).toEqual([['internal', {}]]);
    expect(JSON.stringify(internal.findDetails(ErrorInfoSchema))).not.toContain('secret');
  });
});
