import { create, toBinary } from '@bufbuild/protobuf';
import { Metadata, status as GrpcStatus } from '@grpc/grpc-js';
import { getAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, UpdateAgentRequestSchema } from '../gen/paypolicy/v1/admin_pb.js';
import { AgentStatus, PaymentPolicyService, PaymentType, SignRequestSchema } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createAgent, type Admin } from './helpers/admin.js';
import { grpcChannel, grpcUnary } from './helpers/clients.js';
import { runCliInProcess as runCli } from './helpers/cliInProcess.js';
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

describe('POST /api/sign payload keys are those of the type\'s payload message', () => {
  test('error: a misspelt or foreign payload key is 400 naming payload.<key>, and signs nothing', async () => {
    const agentId = await newAgent();
    for (const [type, payload, key] of [
      ['eip3009', '{"valid_for_second":30}', 'valid_for_second'],
      ['permit2', '{"validForSeconds":30}', 'validForSeconds'],
      ['eip3009', '{"gas":50000}', 'gas'],
      ['eip3009', '{"resource_url":"https://example.com/x"}', 'resource_url'],
      ['permit2', '{"max_amount_usd":"1"}', 'max_amount_usd'],
    ] as const) {
      const r = await signRaw(`{"agent_id":"${agentId}","type":"${type}","recipient_address":"${RECIPIENT}","amount_usd":"0.2","payload":${payload}}`);
      expect.soft(r.status, `${type} ${payload}`).toBe(400);
      expect.soft(r.json, `${type} ${payload}`).toEqual({ error: expect.stringContaining(`"payload.${key}"`), code: 'invalid_argument' });
    }
    // Without a type the payload is a raw transaction's: an authorization's key is unknown to it.
    const untyped = await signRaw(`{"agent_id":"${agentId}","recipient_address":"${RECIPIENT}","amount_usd":"0.2","payload":{"valid_for_seconds":60}}`);
    expect(untyped.json).toEqual({ error: expect.stringContaining('"payload.valid_for_seconds"'), code: 'invalid_argument' });
    for (const type of ['x402', 'mpp']) {
      const r = await signRaw(`{"agent_id":"${agentId}","type":"${type}","payload":{"resource_url":"https://example.com/x","valid_for_seconds":60}}`);
      expect.soft(r.json, type).toEqual({ error: expect.stringContaining('"payload.valid_for_seconds"'), code: 'invalid_argument' });
    }
    expect(await ledger(agentId)).toHaveLength(0);
  });

  test('behavior: the declared key is honoured: valid_for_seconds 30 signs an authorization valid for 30 seconds', async () => {
    const agentId = await newAgent();
    for (const type of ['eip3009', 'permit2']) {
      const before = Math.floor(Date.now() / 1000);
      const r = await signRaw(`{"agent_id":"${agentId}","type":"${type}","recipient_address":"${RECIPIENT}","amount_usd":"0.2","payload":{"valid_for_seconds":30}}`);
      expect(r.status, r.text).toBe(200);
      const end = Number(type === 'eip3009' ? r.json.authorization.valid_before : r.json.permit2.deadline);
      expect(end - before, type).toBeGreaterThanOrEqual(30);
      expect(end - before, type).toBeLessThanOrEqual(32);
    }
  });
});

describe('REST request fields: JSON null is not a value', () => {
  const base = (agentId: string) => ({ agent_id: agentId, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: '0.2' });

  test('error: null for any sign field (top level or payload) is 400 naming it, and signs nothing; a null type does not become raw_transaction', async () => {
    const agentId = await newAgent();
    for (const [field, code] of [
      ['type', 'unsupported_type'], ['chain_id', 'invalid_argument'], ['payload', 'invalid_argument'], ['dry_run', 'invalid_argument'],
      ['idempotency_key', 'invalid_idempotency_key'], ['recipient_address', 'invalid_argument'], ['amount_usd', 'invalid_argument'], ['agent_id', 'invalid_argument'],
    ] as const) {
      const r = await signRaw(JSON.stringify({ ...base(agentId), [field]: null }));
      expect.soft(r.status, field).toBe(400);
      expect.soft(r.json, field).toEqual({ error: expect.stringMatching(field === 'idempotency_key' ? /idempotency/i : new RegExp(`^${field}`)), code });
    }
    for (const [type, key] of [['eip3009', 'valid_for_seconds'], ['raw_transaction', 'gas'], ['raw_transaction', 'max_fee_per_gas']] as const) {
      const r = await signRaw(JSON.stringify({ ...base(agentId), type, payload: { [key]: null } }));
      expect.soft(r.status, key).toBe(400);
      expect.soft(r.json?.error, key).toMatch(new RegExp(`^payload\\.${key}`));
    }
    for (const key of ['resource_url', 'method', 'max_amount_usd']) {
      const r = await signRaw(JSON.stringify({ agent_id: agentId, type: 'x402', payload: { resource_url: 'https://example.com/x', [key]: null } }));
      expect.soft(r.status, key).toBe(400);
      expect.soft(r.json?.error, key).toMatch(new RegExp(`^payload\\.${key}`));
    }
    expect(await ledger(agentId)).toHaveLength(0);
  });

  test('error: null on quote and ping is 400 naming the field', async () => {
    const agentId = await newAgent();
    for (const [body, field] of [
      [{ url: 'https://example.com/x', agent_id: agentId, method: null }, 'method'],
      [{ url: null, agent_id: agentId }, 'url'],
      [{ url: 'https://example.com/x', agent_id: null }, 'agent_id'],
    ] as const) {
      const r = await rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body });
      expect.soft(r.status, field).toBe(400);
      expect.soft(r.json?.error, field).toMatch(new RegExp(`^${field} must be`));
    }
    const ping = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: null } });
    expect(ping.status).toBe(400);
    expect(ping.json).toEqual({ error: 'agent_id must be a string', code: 'invalid_argument' });
  });
});

describe('REST integer fields are written as JSON integers', () => {
  test('error: chain_id, valid_for_seconds and the raw transaction fees with a fraction or an exponent are 400 naming the field, and sign nothing', async () => {
    const agentId = await newAgent();
    const direct = `"agent_id":"${agentId}","recipient_address":"${RECIPIENT}","amount_usd":"0.2"`;
    for (const [body, field] of [
      [`{${direct},"type":"eip3009","chain_id":8453.00000000000001}`, 'chain_id'],
      [`{${direct},"type":"eip3009","chain_id":84530e-1}`, 'chain_id'],
      [`{${direct},"type":"eip3009","chain_id":8453.0}`, 'chain_id'],
      [`{${direct},"type":"eip3009","payload":{"valid_for_seconds":3e1}}`, 'payload.valid_for_seconds'],
      [`{${direct},"type":"permit2","payload":{"valid_for_seconds":60.0}}`, 'payload.valid_for_seconds'],
      [`{${direct},"type":"raw_transaction","payload":{"max_fee_per_gas":1e9}}`, 'payload.max_fee_per_gas'],
      [`{${direct},"type":"raw_transaction","payload":{"gas":5E4}}`, 'payload.gas'],
    ] as const) {
      const r = await signRaw(body);
      expect.soft(r.status, body).toBe(400);
      expect.soft(r.json, body).toEqual({ error: expect.stringMatching(new RegExp(`^${field.replace('.', '\\.')} `)), code: 'invalid_argument' });
    }
    expect(await ledger(agentId)).toHaveLength(0);
    expect((await signRaw(`{${direct},"type":"eip3009","chain_id":8453,"payload":{"valid_for_seconds":30}}`)).status).toBe(200);
  });

  test('error: over Connect JSON, an integer field written with a fraction or an exponent is invalid_argument naming it', async () => {
    const agentId = await newAgent();
    const sign = (body: string) => rest(s.url, 'POST', `/${PaymentPolicyService.typeName}/Sign`, {
      rawBody: body, headers: { 'content-type': 'application/json', authorization: `Bearer ${s.bootstrap.api_key}`, connection: 'close' },
    });
    for (const chainId of ['8453.00000000000001', '84530e-1', '8453.0']) {
      const r = await sign(`{"agentId":"${agentId}","type":"PAYMENT_TYPE_EIP3009","recipientAddress":"${RECIPIENT}","amountUsd":"0.2","chainId":${chainId}}`);
      expect.soft(r.status, chainId).toBe(400);
      expect.soft(r.json?.message, chainId).toMatch(/chainId/);
    }
    const eip = await sign(`{"agentId":"${agentId}","type":"PAYMENT_TYPE_EIP3009","recipientAddress":"${RECIPIENT}","amountUsd":"0.2","eip3009":{"validForSeconds":3e1}}`);
    expect(eip.status).toBe(400);
    expect(eip.json.message).toMatch(/eip3009\.validForSeconds/);
    expect(await ledger(agentId)).toHaveLength(0);
    const window = await connectJson('UpdateOrganization', `{"orgId":"${s.bootstrap.org_id}","approvalWindowSeconds":3.6e3}`);
    expectInvalid(window, /approvalWindowSeconds/);
  });

  test('error: over Connect JSON, null for any field is invalid_argument naming it, and signs nothing (null would read as unset: no key, no dry run, no ceiling)', async () => {
    const agentId = await newAgent();
    const sign = (body: string) => rest(s.url, 'POST', `/${PaymentPolicyService.typeName}/Sign`, {
      rawBody: body, headers: { 'content-type': 'application/json', authorization: `Bearer ${s.bootstrap.api_key}`, connection: 'close' },
    });
    const base = `"agentId":"${agentId}","type":"PAYMENT_TYPE_EIP3009","recipientAddress":"${RECIPIENT}","amountUsd":"0.2"`;
    for (const [extra, field] of [['"idempotencyKey":null', 'idempotencyKey'], ['"dryRun":null', 'dryRun'], ['"chainId":null', 'chainId'], ['"eip3009":{"validForSeconds":null}', 'eip3009.validForSeconds']] as const) {
      const r = await sign(`{${base},${extra}}`);
      expect.soft(r.status, extra).toBe(400);
      expect.soft(r.json?.code, extra).toBe('invalid_argument');
      expect.soft(r.json?.message, extra).toContain(`${field}: null is not a value`);
    }
    expect(await ledger(agentId)).toHaveLength(0);
    expectInvalid(await connectJson('UpdateOrganization', `{"orgId":"${s.bootstrap.org_id}","name":null}`), /name: null is not a value/);
  });
});

describe('REST fields of the wrong JSON type', () => {
  test('error: ping with a non-string agent_id is 400 saying agent_id must be a string', async () => {
    for (const agent_id of [123, true, [], {}]) {
      const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id } });
      expect.soft(r.status, JSON.stringify(agent_id)).toBe(400);
      expect.soft(r.json, JSON.stringify(agent_id)).toEqual({ error: 'agent_id must be a string', code: 'invalid_argument' });
    }
  });

  test('error: a payload.resource_url that is not a string is 400 saying so', async () => {
    const agentId = await newAgent();
    const r = await signRaw(`{"agent_id":"${agentId}","type":"x402","payload":{"resource_url":5}}`);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'payload.resource_url must be a string', code: 'invalid_argument' });
  });
});

describe('an empty Idempotency-Key is refused, not taken for none', () => {
  test('error: REST, an empty idempotency_key or Idempotency-Key header is 400 invalid_idempotency_key, and signs nothing', async () => {
    const agentId = await newAgent();
    const body = `{${eip3009(agentId, '0.2')}`;
    for (const r of [await signRaw(`${body},"idempotency_key":""}`), await signRaw(`${body}}`, { 'idempotency-key': '' })]) {
      expect.soft(r.status, r.text).toBe(400);
      expect.soft(r.json?.code).toBe('invalid_idempotency_key');
    }
    expect(await ledger(agentId)).toHaveLength(0);
  });

  test('error: Connect, an empty idempotencyKey field or Idempotency-Key header is invalid_argument invalid_idempotency_key, and signs nothing', async () => {
    const agentId = await newAgent();
    const request = `{"agentId":"${agentId}","type":"PAYMENT_TYPE_EIP3009","recipientAddress":"${RECIPIENT}","amountUsd":"0.2"`;
    const sign = (body: string, headers: Record<string, string> = {}) => rest(s.url, 'POST', `/${PaymentPolicyService.typeName}/Sign`, {
      rawBody: body, headers: { 'content-type': 'application/json', authorization: `Bearer ${s.bootstrap.api_key}`, connection: 'close', ...headers },
    });
    for (const r of [await sign(`${request},"idempotencyKey":""}`), await sign(`${request}}`, { 'idempotency-key': '' })]) {
      expect.soft(r.status, r.text).toBe(400);
      expect.soft(r.text).toMatch(/invalid_idempotency_key/);
    }
    expect(await ledger(agentId)).toHaveLength(0);
  });

  test('error: gRPC, an empty idempotency-key metadata entry or idempotency_key field is INVALID_ARGUMENT, and signs nothing', async () => {
    const agentId = await newAgent();
    const path = `/${PaymentPolicyService.typeName}/Sign`;
    const request = (key?: string) => toBinary(SignRequestSchema, create(SignRequestSchema, {
      agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.2', chainId: 8453, ...(key === undefined ? {} : { idempotencyKey: key }),
    }));
    const metadata = await grpcRaw(path, request(), { authorization: `Bearer ${s.bootstrap.api_key}`, 'idempotency-key': '' });
    expect(metadata?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    const field = await grpcRaw(path, request(''), { authorization: `Bearer ${s.bootstrap.api_key}` });
    expect(field?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(await ledger(agentId)).toHaveLength(0);
  });
});


describe('USD amounts with surrounding whitespace are refused everywhere', () => {
  test('error: SetPolicy over Connect with " 10" or "10 " is invalid_argument naming the field, and the policy stays', async () => {
    const agentId = await newAgent({ capUsd: '7', thresholdUsd: '1' });
    for (const [cap, threshold, field] of [[' 10', '1', 'spend_cap_usd'], ['10 ', '1', 'spend_cap_usd'], ['10', '\t1', 'approval_threshold_usd'], ['10', '1\n', 'approval_threshold_usd']]) {
      const r = await connectJson('SetPolicy', JSON.stringify({ agentId, allowlist: [RECIPIENT], spendCapUsd: cap, approvalThresholdUsd: threshold }));
      expectInvalid(r, new RegExp(field!));
    }
    expect((await admin.client.getAgent({ agentId }, admin.auth)).agent!.policy).toMatchObject({ spendCapUsd: '7', approvalThresholdUsd: '1' });
  });

  test('error: the CLI\'s policy set --cap " 10" fails with the server\'s message and writes nothing', async () => {
    const agentId = await newAgent({ capUsd: '7', thresholdUsd: '1' });
    const r = await runCli(['policy', 'set', '--agent', agentId, '--allow', RECIPIENT, '--cap', ' 10', '--threshold', '1', '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('paypolicy: invalid_argument: spend_cap_usd must be a non-negative decimal number with at most 6 decimal places');
    expect((await admin.client.getAgent({ agentId }, admin.auth)).agent!.policy).toMatchObject({ spendCapUsd: '7' });
  });
});
