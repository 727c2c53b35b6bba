import { create, toBinary } from '@bufbuild/protobuf';
import { Metadata, status as GrpcStatus } from '@grpc/grpc-js';
import { getAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, UpdateAgentRequestSchema } from '../gen/paypolicy/v1/admin_pb.js';
import { AgentStatus, PaymentPolicyService, PaymentType, SignRequestSchema } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createAgent, type Admin } from './helpers/admin.js';
import { grpcChannel, grpcUnary } from './helpers/clients.js';
import { grpcWebFrame } from './helpers/grpcWeb.js';
import { listAllTransactions, setPolicy } from './helpers/payments.js';
import { rest, startTestServer, type RestResult, type TestServer } from './helpers/server.js';

/**
 * Input the server does not understand is refused, never half-applied: unknown fields, enum values
 * the contract does not declare, wrong JSON types, duplicate JSON keys and USD amounts finer than
 * a micro-dollar, on REST, Connect JSON and gRPC alike. Each refusal is a 400 / invalid_argument
 * naming what was wrong, and nothing changes.
 */

const RECIPIENT = getAddress('0x70997970c51812dc3a010c7d01b50e0d17dc79c8');

let s: TestServer;
let admin: Admin;
let agentCount = 0;

beforeAll(async () => {
  s = await startTestServer();
  admin = adminFor(s);
});
afterAll(async () => s.close());

async function newAgent(policy = { capUsd: '10', thresholdUsd: '1' }): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, `strict-${++agentCount}`);
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], ...policy });
  return agentId;
}

async function agentStatusOf(agentId: string): Promise<AgentStatus> {
  return (await admin.client.getAgent({ agentId }, admin.auth)).agent!.status;
}

/** A Connect JSON call written by hand, so that the body can hold what no generated client sends. */
function connectJson(method: string, rawBody: string): Promise<RestResult> {
  return rest(s.url, 'POST', `/${AdminService.typeName}/${method}`, {
    rawBody, headers: { 'content-type': 'application/json', authorization: `Bearer ${s.bootstrap.admin_token}`, connection: 'close' },
  });
}

/** One unary gRPC call through @grpc/grpc-js with the request as given bytes (or a message the helper encodes). */
function grpcRaw(path: string, body: Uint8Array, metadata: Record<string, string>): Promise<{ code: number; details: string } | undefined> {
  const client = grpcChannel(s.url);
  const md = new Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise<{ code: number; details: string } | undefined>((resolve) => {
    client.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, Buffer.from(body), md, (err) => {
      client.close();
      resolve(err ? { code: err.code, details: err.details } : undefined);
    });
  });
}

function expectInvalid(r: RestResult, field: RegExp): void {
  expect(r.status, r.text).toBe(400);
  expect(r.json.code).toBe('invalid_argument');
  expect(r.json.message).toMatch(field);
}

describe('AdminService over Connect JSON', () => {
  test('error: an UpdateAgent status the enum does not declare is invalid_argument naming status, and the agent stays active', async () => {
    const agentId = await newAgent();
    for (const status of ['"paused"', '"PAUSED"', '"bogus"', '"Agent_Status_Paused"', '99', '-1', '2.5', 'true', '"2x"']) {
      const r = await connectJson('UpdateAgent', `{"agentId":"${agentId}","status":${status}}`);
      expect.soft(r.status, status).toBe(400);
      expectInvalid(r, /status/);
    }
    expect(await agentStatusOf(agentId)).toBe(AgentStatus.ACTIVE);
  });

  test('behavior: the declared names and numbers still pause and resume an agent', async () => {
    const agentId = await newAgent();
    expect((await connectJson('UpdateAgent', `{"agentId":"${agentId}","status":"AGENT_STATUS_PAUSED"}`)).status).toBe(200);
    expect(await agentStatusOf(agentId)).toBe(AgentStatus.PAUSED);
    expect((await connectJson('UpdateAgent', `{"agentId":"${agentId}","status":1}`)).status).toBe(200);
    expect(await agentStatusOf(agentId)).toBe(AgentStatus.ACTIVE);
  });

  test('error: a misspelt field is invalid_argument naming it, and nothing changes', async () => {
    const agentId = await newAgent();
    const r = await connectJson('UpdateAgent', `{"agentId":"${agentId}","stauts":"AGENT_STATUS_PAUSED","name":"renamed"}`);
    expectInvalid(r, /stauts/);
    const agent = (await admin.client.getAgent({ agentId }, admin.auth)).agent!;
    expect(agent.status).toBe(AgentStatus.ACTIVE);
    expect(agent.name).not.toBe('renamed');
  });

  test('error: a duplicate key is invalid_argument naming it, and nothing changes', async () => {
    const agentId = await newAgent();
    const r = await connectJson('UpdateAgent', `{"agentId":"${agentId}","status":"AGENT_STATUS_ACTIVE","status":"AGENT_STATUS_PAUSED"}`);
    expectInvalid(r, /duplicate key "status"/);
    expect(await agentStatusOf(agentId)).toBe(AgentStatus.ACTIVE);
  });

  test('error: a wrong JSON type is invalid_argument naming the field', async () => {
    const agentId = await newAgent();
    const r = await connectJson('SetPolicy', `{"agentId":"${agentId}","allowlist":["${RECIPIENT}"],"spendCapUsd":5,"approvalThresholdUsd":"1"}`);
    expectInvalid(r, /spendCapUsd|spend_cap_usd/);
  });

  test('error: CreateApiKey with a mode the enum does not declare creates no key', async () => {
    const before = (await admin.client.listApiKeys({ orgId: s.bootstrap.org_id }, admin.auth)).apiKeys.length;
    for (const mode of ['"live"', '"API_KEY_MODE_BOGUS"', '7']) {
      const r = await connectJson('CreateApiKey', `{"orgId":"${s.bootstrap.org_id}","mode":${mode},"label":"strict"}`);
      expect.soft(r.status, mode).toBe(400);
      expectInvalid(r, /mode/);
    }
    expect((await admin.client.listApiKeys({ orgId: s.bootstrap.org_id }, admin.auth)).apiKeys).toHaveLength(before);
  });
});

describe('AdminService over gRPC (binary)', () => {
  const updateAgent = { name: 'UpdateAgent', input: UpdateAgentRequestSchema, output: AdminService.method.updateAgent.output };

  test('error: an UpdateAgent status number the enum does not declare is INVALID_ARGUMENT naming status, and nothing changes', async () => {
    const agentId = await newAgent();
    const client = grpcChannel(s.url);
    try {
      const r = await grpcUnary(client, AdminService, updateAgent, { agentId, status: 99 as AgentStatus }, s.bootstrap.admin_token);
      expect(r.ok).toBe(false);
      if (r.ok) return;
      expect(r.code).toBe(GrpcStatus.INVALID_ARGUMENT);
      expect(r.details).toMatch(/status/);
    } finally {
      client.close();
    }
    expect(await agentStatusOf(agentId)).toBe(AgentStatus.ACTIVE);
  });

  test('error: a field number the message does not declare is INVALID_ARGUMENT, and nothing changes', async () => {
    const agentId = await newAgent();
    const known = toBinary(UpdateAgentRequestSchema, create(UpdateAgentRequestSchema, { agentId, name: 'renamed-by-grpc' }));
    // Field 15, varint 2: what a client built from a newer or different contract might send.
    const r = await grpcRaw(`/${AdminService.typeName}/UpdateAgent`, Buffer.concat([known, Buffer.from([15 << 3, 2])]), { authorization: `Bearer ${s.bootstrap.admin_token}` });
    expect(r?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(r?.details).toMatch(/unknown field.*15/);
    expect((await admin.client.getAgent({ agentId }, admin.auth)).agent!.name).not.toBe('renamed-by-grpc');
  });

  test('error: over gRPC-Web (served by connect-node), an undeclared status number and an unknown field are refused the same way', async () => {
    const agentId = await newAgent();
    for (const body of [
      toBinary(UpdateAgentRequestSchema, create(UpdateAgentRequestSchema, { agentId, status: 99 as AgentStatus })),
      Buffer.concat([toBinary(UpdateAgentRequestSchema, create(UpdateAgentRequestSchema, { agentId, status: AgentStatus.PAUSED })), Buffer.from([15 << 3, 2])]),
    ]) {
      const res = await fetch(`${s.url}/${AdminService.typeName}/UpdateAgent`, {
        method: 'POST',
        headers: { 'content-type': 'application/grpc-web+proto', 'x-grpc-web': '1', authorization: `Bearer ${s.bootstrap.admin_token}` },
        body: grpcWebFrame(body),
      });
      const text = new TextDecoder().decode(new Uint8Array(await res.arrayBuffer()));
      expect(res.headers.get('grpc-status') ?? /grpc-status:\s*(\d+)/.exec(text)?.[1]).toBe(String(GrpcStatus.INVALID_ARGUMENT));
    }
    expect(await agentStatusOf(agentId)).toBe(AgentStatus.ACTIVE);
  });
});

describe('AdminService updates that say nothing', () => {
  test('error: UpdateOrganization without name or approval window is invalid_argument, over Connect JSON', async () => {
    expectInvalid(await connectJson('UpdateOrganization', `{"orgId":"${s.bootstrap.org_id}"}`), /approval_window_seconds/);
  });

  test('error: no name and status AGENT_STATUS_UNSPECIFIED is invalid_argument naming status, over Connect JSON and gRPC', async () => {
    const agentId = await newAgent();
    expectInvalid(await connectJson('UpdateAgent', `{"agentId":"${agentId}"}`), /status/);
    expectInvalid(await connectJson('UpdateAgent', `{"agentId":"${agentId}","status":"AGENT_STATUS_UNSPECIFIED"}`), /status/);
    const client = grpcChannel(s.url);
    try {
      const r = await grpcUnary(client, AdminService, { name: 'UpdateAgent', input: UpdateAgentRequestSchema, output: AdminService.method.updateAgent.output },
        { agentId, status: AgentStatus.UNSPECIFIED }, s.bootstrap.admin_token);
      expect(r.ok ? 'ok' : r.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    } finally {
      client.close();
    }
  });
});

/** POST /api/sign with the bootstrap test key, the body as raw text. */
function signRaw(rawBody: string, headers: Record<string, string> = {}): Promise<RestResult> {
  return rest(s.url, 'POST', '/api/sign', { key: s.bootstrap.api_key, rawBody, headers: { 'content-type': 'application/json', connection: 'close', ...headers } });
}

const eip3009 = (agentId: string, amount: string) => `"agent_id":"${agentId}","type":"eip3009","recipient_address":"${RECIPIENT}","amount_usd":${amount}`;

async function ledger(agentId: string) {
  return listAllTransactions(admin, s.bootstrap.org_id, agentId);
}

describe('POST /api/sign body', () => {
  test('behavior: idempotency_key in the body means what the Idempotency-Key header means: a $0.30 reuse of a $0.20 key is 409 and signs nothing', async () => {
    const agentId = await newAgent();
    const first = await signRaw(`{${eip3009(agentId, '0.2')}}`, { 'idempotency-key': 'strict-reuse' });
    expect(first.status, first.text).toBe(200);
    const reuse = await signRaw(`{${eip3009(agentId, '0.3')},"idempotency_key":"strict-reuse"}`);
    expect(reuse.status, reuse.text).toBe(409);
    expect(reuse.json.code).toBe('idempotency_key_reused');
    const repeat = await signRaw(`{${eip3009(agentId, '0.2')},"idempotency_key":"strict-reuse"}`);
    expect(repeat.status, repeat.text).toBe(200);
    expect(repeat.json.idempotent).toBe(true);
    expect(repeat.json.signature).toBe(first.json.signature);
    expect(await ledger(agentId)).toHaveLength(1);
  });

  test('error: an idempotency_key different from the Idempotency-Key header is 400 and signs nothing', async () => {
    const agentId = await newAgent();
    const r = await signRaw(`{${eip3009(agentId, '0.2')},"idempotency_key":"strict-a"}`, { 'idempotency-key': 'strict-b' });
    expect(r.status, r.text).toBe(400);
    expect(r.json).toEqual({ error: expect.stringMatching(/idempotency_key/i), code: 'invalid_idempotency_key' });
    expect(await ledger(agentId)).toHaveLength(0);
  });

  test('error: an unknown field is 400 naming it and signs nothing', async () => {
    const agentId = await newAgent();
    for (const extra of ['"memo":"x"', '"amountUsd":"5"', '"idempotencyKey":"k"', '"Agent_Id":"x"']) {
      const r = await signRaw(`{${eip3009(agentId, '0.2')},${extra}}`);
      expect.soft(r.status, extra).toBe(400);
      expect(r.json).toEqual({ error: expect.stringContaining(`"${extra.split('"')[1]}"`), code: 'invalid_argument' });
    }
    expect(await ledger(agentId)).toHaveLength(0);
  });

  test('error: a duplicate key, at the top or in the payload, is 400 naming it and signs nothing', async () => {
    const agentId = await newAgent();
    const top = await signRaw(`{${eip3009(agentId, '0.2')},"amount_usd":0.9}`);
    expect(top.status, top.text).toBe(400);
    expect(top.json).toEqual({ error: expect.stringContaining('"amount_usd"'), code: 'invalid_json' });
    const nested = await signRaw(`{${eip3009(agentId, '0.2')},"payload":{"valid_for_seconds":60,"valid_for_seconds":600}}`);
    expect(nested.status, nested.text).toBe(400);
    expect(nested.json.error).toContain('"payload.valid_for_seconds"');
    expect(await ledger(agentId)).toHaveLength(0);
  });

  test('error: a JSON number amount with more than 6 decimals (or in exponent form) is refused like the same string', async () => {
    const agentId = await newAgent({ capUsd: '10', thresholdUsd: '1' });
    for (const amount of ['1.00000000000000001', '"1.00000000000000001"', '0.2000001', '1e-7', '0.1e1', '1E0', '1e400', '-0']) {
      const r = await signRaw(`{${eip3009(agentId, amount)}}`);
      expect.soft(r.status, amount).toBe(400);
      expect.soft(r.json?.error, amount).toMatch(/amount_usd/);
    }
    expect(await ledger(agentId)).toHaveLength(0);
    // The same digits within 6 decimals are a payment (trailing zeros are digits like any other).
    expect((await signRaw(`{${eip3009(agentId, '0.250000')}}`)).status).toBe(200);
  });

  test('error: payload.max_amount_usd as a JSON number with more than 6 decimals is refused', async () => {
    const agentId = await newAgent();
    const r = await signRaw(`{"agent_id":"${agentId}","type":"x402","payload":{"resource_url":"https://example.com/x","max_amount_usd":0.10000000000000001}}`);
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toMatch(/max_amount_usd/);
  });

  test('error: wrong JSON types are 400 naming the field', async () => {
    const agentId = await newAgent();
    for (const [field, bad] of [['chain_id', '"8453"'], ['dry_run', '"true"'], ['payload', '[]'], ['type', '3'], ['amount_usd', 'true'], ['recipient_address', '1']] as const) {
      const body = `{${eip3009(agentId, '0.2').replace(new RegExp(`"${field}":[^,]*`), '')},"${field}":${bad}}`.replace('{,', '{').replace(',,', ',');
      const r = await signRaw(body);
      expect.soft(r.status, field).toBe(400);
      expect.soft(r.json?.error, field).toMatch(new RegExp(field));
    }
    expect(await ledger(agentId)).toHaveLength(0);
  });
});

describe('POST /api/ping and /api/quote bodies', () => {
  test('error: an unknown field is 400 naming it', async () => {
    const ping = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id, agnet: 1 } });
    expect(ping.status).toBe(400);
    expect(ping.json).toEqual({ error: expect.stringContaining('"agnet"'), code: 'invalid_argument' });
    const quote = await rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body: { url: 'https://example.com/x', agent_id: s.bootstrap.agent_id, methd: 'POST' } });
    expect(quote.status).toBe(400);
    expect(quote.json).toEqual({ error: expect.stringContaining('"methd"'), code: 'invalid_argument' });
  });
});

describe('POST /api/quote wrong types', () => {
  test('error: a url or agent_id that is not a string is 400 naming it', async () => {
    for (const [body, field] of [[{ url: 5, agent_id: s.bootstrap.agent_id }, 'url'], [{ url: 'https://example.com/x', agent_id: 5 }, 'agent_id']] as const) {
      const r = await rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body });
      expect(r.status, field).toBe(400);
      expect(r.json.error, field).toMatch(new RegExp(`^${field} must be a string`));
    }
  });
});

describe('PaymentPolicyService Sign over gRPC', () => {
  test('error: an idempotency_key field different from the Idempotency-Key header is INVALID_ARGUMENT and signs nothing', async () => {
    const agentId = await newAgent();
    const request = create(SignRequestSchema, {
      agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.2', idempotencyKey: 'strict-field', chainId: 8453,
    });
    const r = await grpcRaw(`/${PaymentPolicyService.typeName}/Sign`, toBinary(SignRequestSchema, request), {
      authorization: `Bearer ${s.bootstrap.api_key}`, 'idempotency-key': 'strict-header',
    });
    expect(r?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(r?.details).toMatch(/idempotency/i);
    expect(await ledger(agentId)).toHaveLength(0);
  });
});
