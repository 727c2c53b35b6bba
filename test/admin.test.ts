import { status as GrpcStatus } from '@grpc/grpc-js';
import { AgentStatus } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { toJson } from '@bufbuild/protobuf';
import { timestampFromMs, timestampMs } from '@bufbuild/protobuf/wkt';
import { Code, type CallOptions, type Client } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, ApiKeyMode, ListApiKeysResponseSchema, TransactionStatus, type Transaction } from '../gen/paypolicy/v1/admin_pb.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { anonymous, bearer, expectRpcError } from './helpers/rpc.js';
import { PING_RECORD_INTERVAL_MS } from '../src/app/organizations/ping.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

const T0 = Date.UTC(2026, 0, 1);

let s: TestServer;
let admin: Client<typeof AdminService>;
let auth: { headers: Record<string, string> };
let clock = T0;

beforeAll(async () => {
  s = await startTestServer({ now: () => clock });
  admin = connectClient(AdminService, s.url);
  auth = bearer(s.bootstrap.admin_token);
});
afterAll(async () => s.close());

/** REST ping without keep-alive (see helpers/rpc.ts). */
const ping = (key: string, agentId: string) =>
  rest(s.url, 'POST', '/api/ping', { key, body: { agent_id: agentId }, headers: { connection: 'close' } });

/** A fresh organization, so a test's rows do not mix with other tests'. */
async function newOrg(name = 'acme') {
  const { organization } = await admin.createOrganization({ name }, auth);
  return organization!;
}

describe('AdminService authentication', () => {
  const methods = AdminService.methods;
  const call = (name: string, options: CallOptions) =>
    (admin[name as keyof typeof admin] as unknown as (req: object, o: CallOptions) => Promise<unknown>)({}, options);

  test('error: unauthenticated: every RPC without an Authorization header', async () => {
    expect(methods.length).toBe(26);
    for (const m of methods) {
      const err = await expectRpcError(call(m.localName, anonymous), Code.Unauthenticated, /Missing Authorization header/);
      expect(err.metadata.get('x-error-code'), m.name).toBe('unauthenticated');
    }
  });

  test('error: unauthenticated: every RPC with a wrong admin token', async () => {
    const wrong = `ppadm_${'0'.repeat(48)}`;
    for (const m of methods) await expectRpcError(call(m.localName, bearer(wrong)), Code.Unauthenticated, /Invalid admin token/);
  });

  test('error: unauthenticated: every RPC with an API key instead of the admin token', async () => {
    for (const m of methods) await expectRpcError(call(m.localName, bearer(s.bootstrap.api_key)), Code.Unauthenticated);
  });

  test('error: unauthenticated: a non-Bearer scheme', async () => {
    await expectRpcError(
      admin.listOrganizations({}, { headers: { authorization: `Basic ${s.bootstrap.admin_token}`, connection: 'close' } }),
      Code.Unauthenticated,
      /Malformed Authorization header/,
    );
  });

  test('behavior: a rejected call changes nothing', async () => {
    const before = (await admin.listOrganizations({}, auth)).organizations.length;
    await expectRpcError(admin.createOrganization({ name: 'sneaky' }, bearer(s.bootstrap.api_key)), Code.Unauthenticated);
    expect((await admin.listOrganizations({}, auth)).organizations.length).toBe(before);
  });
});

describe('AdminService over gRPC', () => {
  test('behavior: ListOrganizations works with the admin token and is UNAUTHENTICATED without it', async () => {
    const ch = grpcChannel(s.url);
    try {
      const ok = await grpcUnary(ch, AdminService, AdminService.method.listOrganizations, {}, s.bootstrap.admin_token);
      expect(ok.ok).toBe(true);
      expect(ok.ok && ok.message.organizations.map((o) => o.id)).toContain(s.bootstrap.org_id);

      const none = await grpcUnary(ch, AdminService, AdminService.method.listOrganizations, {});
      expect(none.ok).toBe(false);
      expect(!none.ok && none.code).toBe(GrpcStatus.UNAUTHENTICATED);
      expect(!none.ok && none.metadata.get('x-error-code')).toEqual(['unauthenticated']);

      const wrong = await grpcUnary(ch, AdminService, AdminService.method.listOrganizations, {}, s.bootstrap.api_key);
      expect(!wrong.ok && wrong.code).toBe(GrpcStatus.UNAUTHENTICATED);
    } finally {
      ch.close();
    }
  });
});

describe('CreateOrganization / ListOrganizations', () => {
  test('behavior: creates an organization without treasury, default window 3600 s, listed oldest first', async () => {
    clock += 1000;
    const org = await newOrg('  Trimmed Name  ');
    expect(org).toMatchObject({ name: 'Trimmed Name', treasuryAddress: '', approvalWindowSeconds: 3600 });
    expect(org.id).toMatch(/^org_[0-9a-z]+$/);
    expect(timestampMs(org.createdAt!)).toBe(clock);
    const { organizations } = await admin.listOrganizations({}, auth);
    expect(organizations[0]?.id).toBe(s.bootstrap.org_id);
    expect(organizations.find((o) => o.id === org.id)).toMatchObject({ name: 'Trimmed Name', treasuryAddress: '' });
  });

  test('error: invalid_argument: empty or blank name', async () => {
    await expectRpcError(admin.createOrganization({ name: '' }, auth), Code.InvalidArgument, /name must be 1 to 200/);
    await expectRpcError(admin.createOrganization({ name: '   ' }, auth), Code.InvalidArgument, /name/);
    await expectRpcError(admin.createOrganization({ name: 'x'.repeat(201) }, auth), Code.InvalidArgument, /name/);
    await expectRpcError(admin.createOrganization({ name: 'bad\nname' }, auth), Code.InvalidArgument, /name/);
  });

  test('behavior: approvalWindowSeconds accepts 60 and 604800', async () => {
    const min = await admin.createOrganization({ name: 'min', approvalWindowSeconds: 60 }, auth);
    const max = await admin.createOrganization({ name: 'max', approvalWindowSeconds: 7 * 24 * 3600 }, auth);
    expect(min.organization?.approvalWindowSeconds).toBe(60);
    expect(max.organization?.approvalWindowSeconds).toBe(604800);
  });

  test('error: invalid_argument: approvalWindowSeconds below 60 or above 7 days', async () => {
    for (const w of [1, 59, 604801, 4294967295]) {
      await expectRpcError(admin.createOrganization({ name: 'w', approvalWindowSeconds: w }, auth), Code.InvalidArgument, /approval_window_seconds must be between 60 and 604800/);
    }
  });
});

describe('UpdateOrganization', () => {
  test('behavior: renames and changes the approval window; unset fields keep their value', async () => {
    const org = await newOrg('before');
    const renamed = await admin.updateOrganization({ orgId: org.id, name: 'after' }, auth);
    expect(renamed.organization).toMatchObject({ id: org.id, name: 'after', approvalWindowSeconds: 3600 });
    const rewindowed = await admin.updateOrganization({ orgId: org.id, approvalWindowSeconds: 900 }, auth);
    expect(rewindowed.organization).toMatchObject({ name: 'after', approvalWindowSeconds: 900 });
    const { organizations } = await admin.listOrganizations({}, auth);
    expect(organizations.find((o) => o.id === org.id)).toMatchObject({ name: 'after', approvalWindowSeconds: 900 });
  });

  test('behavior: new approval requests of the bootstrapped organization get the new window', async () => {
    await admin.updateOrganization({ orgId: s.bootstrap.org_id, approvalWindowSeconds: 120 }, auth);
    const recipient = '0x2096aBCdEf0123456789aBCDeF0123456789287C';
    const { agent } = await admin.createAgent({ orgId: s.bootstrap.org_id, name: 'window' }, auth);
    await admin.setPolicy({ agentId: agent!.id, allowlist: [recipient], spendCapUsd: '10', approvalThresholdUsd: '1' }, auth);
    const r = await rest(s.url, 'POST', '/api/sign', {
      key: s.bootstrap.api_key, body: { agent_id: agent!.id, type: 'eip3009', recipient_address: recipient, amount_usd: 2 },
    });
    expect(r.status).toBe(202);
    const status = await rest(s.url, 'GET', `/api/approvals/${r.json.approval_request_id}/status`, { key: s.bootstrap.api_key });
    expect(Date.parse(status.json.expires_at) - clock).toBe(120_000);
    await admin.updateOrganization({ orgId: s.bootstrap.org_id, approvalWindowSeconds: 3600 }, auth);
  });

  test('error: invalid_argument for a bad window or name; not_found for an unknown organization', async () => {
    const org = await newOrg('bounds');
    await expectRpcError(admin.updateOrganization({ orgId: org.id, approvalWindowSeconds: 59 }, auth), Code.InvalidArgument, /approval_window_seconds/);
    await expectRpcError(admin.updateOrganization({ orgId: org.id, name: ' ' }, auth), Code.InvalidArgument, /name/);
    await expectRpcError(admin.updateOrganization({ orgId: 'org_000000000000000000000000', name: 'x' }, auth), Code.NotFound, /Organization not found/);
  });
});

describe('ProvisionTreasury', () => {
  test('behavior: returns a checksummed address that ListOrganizations then shows', async () => {
    const org = await newOrg();
    const { treasuryAddress } = await admin.provisionTreasury({ orgId: org.id }, auth);
    expect(treasuryAddress).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(treasuryAddress).not.toBe(treasuryAddress.toLowerCase());
    const listed = (await admin.listOrganizations({}, auth)).organizations.find((o) => o.id === org.id);
    expect(listed?.treasuryAddress).toBe(treasuryAddress);
    expect(s.app.deps.vault.account(org.id).address).toBe(treasuryAddress);
  });

  test('error: conflict: a second provisioning is AlreadyExists and keeps the first key', async () => {
    const org = await newOrg();
    const { treasuryAddress } = await admin.provisionTreasury({ orgId: org.id }, auth);
    const err = await expectRpcError(admin.provisionTreasury({ orgId: org.id }, auth), Code.AlreadyExists, /already provisioned/);
    expect(err.metadata.get('x-error-code')).toBe('treasury_exists');
    expect(s.app.deps.vault.address(org.id)).toBe(treasuryAddress);
  });

  test('error: not_found: unknown or malformed organization id', async () => {
    await expectRpcError(admin.provisionTreasury({ orgId: 'org_000000000000000000000000' }, auth), Code.NotFound);
    await expectRpcError(admin.provisionTreasury({ orgId: 'nope' }, auth), Code.NotFound);
  });
});

describe('CreateApiKey / ListApiKeys / RevokeApiKey', () => {
  test('behavior: the plaintext is returned once; ListApiKeys shows only the prefix; the key pings', async () => {
    const created = await admin.createApiKey({ orgId: s.bootstrap.org_id, mode: ApiKeyMode.LIVE, label: 'ci' }, auth);
    const plaintext = created.plaintextKey;
    expect(plaintext).toMatch(/^ak_live_[0-9a-f]{48}$/);
    expect(created.apiKey).toMatchObject({ orgId: s.bootstrap.org_id, mode: ApiKeyMode.LIVE, label: 'ci', prefix: plaintext.slice(0, 16) });
    expect(created.apiKey?.id).toMatch(/^key_[0-9a-z]+$/);
    expect(created.apiKey?.revokedAt).toBeUndefined();

    const list = await admin.listApiKeys({ orgId: s.bootstrap.org_id }, auth);
    const listed = list.apiKeys.find((k) => k.id === created.apiKey?.id);
    expect(listed?.prefix).toBe(plaintext.slice(0, 16));
    const wire = JSON.stringify(toJson(ListApiKeysResponseSchema, list));
    expect(wire).not.toContain(plaintext);
    expect(wire).not.toContain(plaintext.slice(16));

    const r = await ping(plaintext, s.bootstrap.agent_id);
    expect(r.status).toBe(200);
    expect(r.json.org_id).toBe(s.bootstrap.org_id);
  });

  test('behavior: test mode keys start with ak_test_', async () => {
    const created = await admin.createApiKey({ orgId: s.bootstrap.org_id, mode: ApiKeyMode.TEST }, auth);
    expect(created.plaintextKey).toMatch(/^ak_test_[0-9a-f]{48}$/);
    expect(created.apiKey?.mode).toBe(ApiKeyMode.TEST);
    expect(created.apiKey?.label).toBe('');
  });

  test('error: invalid_argument: mode is required', async () => {
    await expectRpcError(admin.createApiKey({ orgId: s.bootstrap.org_id }, auth), Code.InvalidArgument, /mode must be live or test/);
    await expectRpcError(admin.createApiKey({ orgId: s.bootstrap.org_id, mode: ApiKeyMode.UNSPECIFIED }, auth), Code.InvalidArgument);
  });

  test('error: invalid_argument: label over 200 characters; not_found: unknown organization', async () => {
    await expectRpcError(admin.createApiKey({ orgId: s.bootstrap.org_id, mode: ApiKeyMode.TEST, label: 'l'.repeat(201) }, auth), Code.InvalidArgument, /label/);
    await expectRpcError(admin.createApiKey({ orgId: 'org_000000000000000000000000', mode: ApiKeyMode.TEST }, auth), Code.NotFound);
  });

  test('behavior: a revoked key gets 401 on the next request; revoking twice keeps the first time', async () => {
    const { apiKey, plaintextKey } = await admin.createApiKey({ orgId: s.bootstrap.org_id, mode: ApiKeyMode.TEST }, auth);
    expect((await ping(plaintextKey, s.bootstrap.agent_id)).status).toBe(200);
    clock += 1000;
    const revoked = await admin.revokeApiKey({ id: apiKey!.id }, auth);
    expect(timestampMs(revoked.apiKey!.revokedAt!)).toBe(clock);
    const r = await ping(plaintextKey, s.bootstrap.agent_id);
    expect(r.status).toBe(401);
    expect(r.json).toEqual({ error: 'Invalid or revoked API key', code: 'unauthenticated' });

    clock += 1000;
    const again = await admin.revokeApiKey({ id: apiKey!.id }, auth);
    expect(timestampMs(again.apiKey!.revokedAt!)).toBe(clock - 1000);
    const listed = (await admin.listApiKeys({ orgId: s.bootstrap.org_id }, auth)).apiKeys.find((k) => k.id === apiKey!.id);
    expect(listed?.revokedAt).toBeDefined();
    // Other keys are unaffected.
    expect((await ping(s.bootstrap.api_key, s.bootstrap.agent_id)).status).toBe(200);
  });

  test('error: not_found: revoking an unknown key, and a malformed id alike (as GetAgent answers an unknown agent)', async () => {
    await expectRpcError(admin.revokeApiKey({ id: 'key_000000000000000000000000' }, auth), Code.NotFound, /API key not found/);
    await expectRpcError(admin.revokeApiKey({ id: 'ak_test_123' }, auth), Code.NotFound, /API key not found/);
    await expectRpcError(admin.revokeApiKey({ id: 'nope' }, auth), Code.NotFound, /API key not found/);
  });

  test('behavior: ListApiKeys is per organization, newest first', async () => {
    const org = await newOrg();
    clock += 1000;
    const a = await admin.createApiKey({ orgId: org.id, mode: ApiKeyMode.TEST, label: 'a' }, auth);
    clock += 1000;
    const b = await admin.createApiKey({ orgId: org.id, mode: ApiKeyMode.LIVE, label: 'b' }, auth);
    const { apiKeys } = await admin.listApiKeys({ orgId: org.id }, auth);
    expect(apiKeys.map((k) => k.id)).toEqual([b.apiKey!.id, a.apiKey!.id]);
    await expectRpcError(admin.listApiKeys({ orgId: 'org_000000000000000000000000' }, auth), Code.NotFound);
  });
});

describe('CreateAgent / UpdateAgent / GetAgent / ListAgents', () => {
  test('behavior: a new agent is active with a deny-everything policy', async () => {
    const org = await newOrg();
    clock += 1000;
    const { agent } = await admin.createAgent({ orgId: org.id, name: 'buyer' }, auth);
    expect(agent).toMatchObject({ orgId: org.id, name: 'buyer', status: AgentStatus.ACTIVE });
    expect(agent?.id).toMatch(/^agt_[0-9a-z]+$/);
    expect(agent?.policy).toMatchObject({ allowlist: [], spendCapUsd: '0', approvalThresholdUsd: '0' });
    expect(agent?.lastPingAt).toBeUndefined();
    expect(timestampMs(agent!.createdAt!)).toBe(clock);

    const got = await admin.getAgent({ agentId: agent!.id }, auth);
    expect(got.agent).toEqual(agent);
    const { agents } = await admin.listAgents({ orgId: org.id }, auth);
    expect(agents.map((a) => a.id)).toEqual([agent!.id]);
  });

  test('behavior: a ping sets lastPingAt', async () => {
    clock += 5000;
    expect((await ping(s.bootstrap.api_key, s.bootstrap.agent_id)).status).toBe(200);
    const { agent } = await admin.getAgent({ agentId: s.bootstrap.agent_id }, auth);
    expect(timestampMs(agent!.lastPingAt!)).toBe(clock);
  });

  test('error: invalid_argument: empty name; not_found: unknown organization', async () => {
    await expectRpcError(admin.createAgent({ orgId: s.bootstrap.org_id, name: ' ' }, auth), Code.InvalidArgument, /name/);
    await expectRpcError(admin.createAgent({ orgId: 'org_000000000000000000000000', name: 'x' }, auth), Code.NotFound);
    await expectRpcError(admin.listAgents({ orgId: 'org_000000000000000000000000' }, auth), Code.NotFound);
  });

  test('behavior: UpdateAgent changes only the fields that are set', async () => {
    const org = await newOrg();
    const { agent } = await admin.createAgent({ orgId: org.id, name: 'before' }, auth);
    const renamed = await admin.updateAgent({ agentId: agent!.id, name: 'after' }, auth);
    expect(renamed.agent).toMatchObject({ name: 'after', status: AgentStatus.ACTIVE });
    const paused = await admin.updateAgent({ agentId: agent!.id, status: AgentStatus.PAUSED }, auth);
    expect(paused.agent).toMatchObject({ name: 'after', status: AgentStatus.PAUSED });
    const resumed = await admin.updateAgent({ agentId: agent!.id, status: AgentStatus.ACTIVE }, auth);
    expect(resumed.agent?.status).toBe(AgentStatus.ACTIVE);
  });

  test('error: invalid_argument: unknown status or blank name', async () => {
    // Numbers the enum lacks (proto3 enums are open, so a client can send them).
    for (const status of [4, 99, -1]) {
      await expectRpcError(admin.updateAgent({ agentId: s.bootstrap.agent_id, status }, auth), Code.InvalidArgument, new RegExp(`^status: ${status} is not a value of paypolicy.v1.AgentStatus`));
    }
    await expectRpcError(admin.updateAgent({ agentId: s.bootstrap.agent_id, name: '' }, auth), Code.InvalidArgument, /name/);
    expect((await admin.getAgent({ agentId: s.bootstrap.agent_id }, auth)).agent?.status).toBe(AgentStatus.ACTIVE);
  });

  test('error: failed_precondition: a revoked agent cannot be reactivated or paused', async () => {
    const { agent } = await admin.createAgent({ orgId: s.bootstrap.org_id, name: 'doomed' }, auth);
    await admin.updateAgent({ agentId: agent!.id, status: AgentStatus.REVOKED }, auth);
    for (const status of [AgentStatus.ACTIVE, AgentStatus.PAUSED]) {
      const err = await expectRpcError(admin.updateAgent({ agentId: agent!.id, status }, auth), Code.FailedPrecondition, /cannot be reactivated/);
      expect(err.metadata.get('x-error-code')).toBe('agent_revoked');
    }
    // Renaming and re-revoking stay possible; the status stays revoked.
    const renamed = await admin.updateAgent({ agentId: agent!.id, name: 'doomed-2', status: AgentStatus.REVOKED }, auth);
    expect(renamed.agent).toMatchObject({ name: 'doomed-2', status: AgentStatus.REVOKED });
    // A revoked agent cannot ping.
    const r = await ping(s.bootstrap.api_key, agent!.id);
    expect(r.status).toBe(400);
  });

  test('error: not_found: unknown or malformed agent id', async () => {
    await expectRpcError(admin.getAgent({ agentId: 'agt_000000000000000000000000' }, auth), Code.NotFound, /Agent not found/);
    await expectRpcError(admin.getAgent({ agentId: "agt_'; DROP TABLE agents;--" }, auth), Code.NotFound);
    await expectRpcError(admin.updateAgent({ agentId: 'agt_000000000000000000000000', name: 'x' }, auth), Code.NotFound);
  });
});

describe('SetPolicy', () => {
  test('behavior: addresses are lowercased, duplicates removed, slugs kept, amounts normalized', async () => {
    const { agent } = await admin.createAgent({ orgId: s.bootstrap.org_id, name: 'policy' }, auth);
    const mixed = '0xAbCdEf0123456789aBcDeF0123456789AbCdEf01';
    clock += 1000;
    const { policy } = await admin.setPolicy({
      agentId: agent!.id,
      allowlist: [mixed, mixed.toLowerCase(), ' weather-api ', 'weather-api', '0x' + 'F'.repeat(40)],
      spendCapUsd: '25.500000',
      approvalThresholdUsd: '0.000001',
    }, auth);
    expect(policy).toMatchObject({
      allowlist: [mixed.toLowerCase(), 'weather-api', '0x' + 'f'.repeat(40)],
      spendCapUsd: '25.5',
      approvalThresholdUsd: '0.000001',
    });
    expect(timestampMs(policy!.updatedAt!)).toBe(clock);
    const got = await admin.getAgent({ agentId: agent!.id }, auth);
    expect(got.agent?.policy).toEqual(policy);
  });

  test('behavior: an empty allowlist and zero amounts are allowed', async () => {
    const { policy } = await admin.setPolicy({ agentId: s.bootstrap.agent_id, allowlist: [], spendCapUsd: '0', approvalThresholdUsd: '0' }, auth);
    expect(policy).toMatchObject({ allowlist: [], spendCapUsd: '0', approvalThresholdUsd: '0' });
    // Restore the bootstrap policy for other tests.
    await admin.setPolicy({ agentId: s.bootstrap.agent_id, allowlist: [], spendCapUsd: '10', approvalThresholdUsd: '1' }, auth);
  });

  test('error: invalid_argument: garbage allowlist entries name the allowlist', async () => {
    for (const entry of ['Not A Slug', '0xZZcdef0123456789abcdef0123456789abcdef01', '0xABC', '-leading-dash', 'under_score', '']) {
      await expectRpcError(
        admin.setPolicy({ agentId: s.bootstrap.agent_id, allowlist: ['ok-slug', entry], spendCapUsd: '1', approvalThresholdUsd: '1' }, auth),
        Code.InvalidArgument,
        /allowlist entry .* is neither a 0x address nor a service slug/,
      );
    }
    await expectRpcError(
      admin.setPolicy({ agentId: s.bootstrap.agent_id, allowlist: Array.from({ length: 1001 }, (_, i) => `s${i}`), spendCapUsd: '1', approvalThresholdUsd: '1' }, auth),
      Code.InvalidArgument,
      /allowlist must have at most 1000 entries/,
    );
  });

  // A typo or truncated paste of an address is lowercase alphanumeric and would pass SLUG; it
  // must be refused rather than stored as a slug that can never match a recipient.
  test('error: invalid_argument: a malformed 0x address is not accepted as a slug', async () => {
    const { agent } = await admin.createAgent({ orgId: s.bootstrap.org_id, name: 'typo' }, auth);
    const truncated = '0x' + 'ab'.repeat(19) + 'a'; // 39 hex digits
    for (const entry of ['0x123', truncated]) {
      await expectRpcError(
        admin.setPolicy({ agentId: agent!.id, allowlist: [entry], spendCapUsd: '1', approvalThresholdUsd: '1' }, auth),
        Code.InvalidArgument,
        /allowlist entry/,
      );
    }
  });

  test('error: invalid_argument: amounts with more than 6 decimals, negative, exponent or empty name the field', async () => {
    for (const bad of ['1.1234567', '-1', '1e3', '', 'abc', '1000000000.000001']) {
      await expectRpcError(
        admin.setPolicy({ agentId: s.bootstrap.agent_id, allowlist: [], spendCapUsd: bad, approvalThresholdUsd: '1' }, auth),
        Code.InvalidArgument,
        /^spend_cap_usd must be/,
      );
      await expectRpcError(
        admin.setPolicy({ agentId: s.bootstrap.agent_id, allowlist: [], spendCapUsd: '1', approvalThresholdUsd: bad }, auth),
        Code.InvalidArgument,
        /^approval_threshold_usd must be/,
      );
    }
    // Nothing changed.
    const { agent } = await admin.getAgent({ agentId: s.bootstrap.agent_id }, auth);
    expect(agent?.policy).toMatchObject({ spendCapUsd: '10', approvalThresholdUsd: '1', allowlist: [] });
  });

  test('error: not_found: an unknown agent, a malformed id and an empty one alike (as GetAgent and UpdateAgent answer)', async () => {
    const req = { allowlist: [], spendCapUsd: '1', approvalThresholdUsd: '1' };
    for (const agentId of ['nope', '', 'agt_000000000000000000000000', `${s.bootstrap.agent_id} `, s.bootstrap.agent_id.toUpperCase()]) {
      await expectRpcError(admin.setPolicy({ ...req, agentId }, auth), Code.NotFound, /Agent not found/);
    }
  });
});

describe('UpsertService / ListServices / DeleteService', () => {
  const resolve = (slug: string) => rest(s.url, 'GET', `/api/resolve?slug=${slug}`, { key: s.bootstrap.api_key, headers: { connection: 'close' } });

  test('behavior: upserting twice keeps the id and replaces the fields', async () => {
    const first = await admin.upsertService({
      service: {
        id: 'client-chosen-id', slug: 'weather', name: 'Weather', description: 'v1', category: 'data',
        docsUrl: 'https://weather.example/docs',
        paymentMethods: [{ realm: 'weather.example', baseUrl: 'https://weather.example', protocol: 'x402' }],
        endpoints: [{ method: 'get', path: '/forecast', description: 'forecast', priceAtomic: '1000', currency: 'USDC', pricingModel: 'fixed', protocol: 'x402' }],
      },
    }, auth);
    const id = first.service!.id;
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(first.service).toMatchObject({ slug: 'weather', name: 'Weather', description: 'v1' });
    expect(first.service?.endpoints[0]).toMatchObject({ method: 'GET', priceAtomic: '1000' });

    const second = await admin.upsertService({ service: { slug: 'weather', name: 'Weather 2', description: 'v2', endpoints: [{ method: 'POST', path: '/x' }] } }, auth);
    expect(second.service).toMatchObject({ id, slug: 'weather', name: 'Weather 2', description: 'v2', category: '', docsUrl: '', paymentMethods: [] });
    expect(second.service?.endpoints).toHaveLength(1);
    expect(second.service?.endpoints[0]?.priceAtomic).toBeUndefined();

    const { services } = await admin.listServices({}, auth);
    expect(services.filter((x) => x.slug === 'weather')).toEqual([second.service]);
    const r = await resolve('weather');
    expect(r.json).toMatchObject({ resolvedCount: 1, results: { weather: { id, name: 'Weather 2' } } });
  });

  test('behavior: ListServices is ordered by slug', async () => {
    await admin.upsertService({ service: { slug: 'zeta', name: 'Z' } }, auth);
    await admin.upsertService({ service: { slug: 'alpha', name: 'A' } }, auth);
    const slugs = (await admin.listServices({}, auth)).services.map((x) => x.slug);
    expect(slugs).toEqual([...slugs].sort());
    expect(slugs).toEqual(expect.arrayContaining(['alpha', 'zeta']));
  });

  test('error: invalid_argument: invalid slug, missing service, bad fields', async () => {
    for (const slug of ['', 'Weather', 'has space', '-dash', 'dash-', 'a'.repeat(65), 'under_score']) {
      await expectRpcError(admin.upsertService({ service: { slug, name: 'x' } }, auth), Code.InvalidArgument, /slug must be/);
    }
    await expectRpcError(admin.upsertService({}, auth), Code.InvalidArgument, /service is required/);
    await expectRpcError(admin.upsertService({ service: { slug: 'ok', name: '' } }, auth), Code.InvalidArgument, /name/);
    await expectRpcError(admin.upsertService({ service: { slug: 'ok', name: 'x', docsUrl: 'ftp://x' } }, auth), Code.InvalidArgument, /docs_url/);
    await expectRpcError(admin.upsertService({ service: { slug: 'ok', name: 'x', logoUrl: 'https://u:p@x.example/l.png' } }, auth), Code.InvalidArgument, /logo_url must not carry credentials/);
    await expectRpcError(admin.upsertService({ service: { slug: 'ok', name: 'x', endpoints: [{ method: 'FETCH' }] } }, auth), Code.InvalidArgument, /endpoints\[0\]\.method/);
    await expectRpcError(admin.upsertService({ service: { slug: 'ok', name: 'x', endpoints: [{ method: 'GET', priceAtomic: '-1' }] } }, auth), Code.InvalidArgument, /endpoints\[0\]\.price_atomic/);
    expect((await admin.listServices({}, auth)).services.map((x) => x.slug)).not.toContain('ok');
  });

  test('behavior: DeleteService removes the record; resolve then maps the slug to null', async () => {
    await admin.upsertService({ service: { slug: 'temp-svc', name: 'Temp' } }, auth);
    await expect(admin.deleteService({ slug: 'temp-svc' }, auth)).resolves.toBeDefined();
    expect((await admin.listServices({}, auth)).services.map((x) => x.slug)).not.toContain('temp-svc');
    const r = await resolve('temp-svc');
    expect(r.json).toEqual({ results: { 'temp-svc': null }, resolvedCount: 0, unresolvedCount: 1 });
  });

  test('error: not_found: deleting an unknown slug (including a second delete)', async () => {
    await expectRpcError(admin.deleteService({ slug: 'never-registered' }, auth), Code.NotFound, /Service not found/);
    await admin.upsertService({ service: { slug: 'once', name: 'Once' } }, auth);
    await admin.deleteService({ slug: 'once' }, auth);
    await expectRpcError(admin.deleteService({ slug: 'once' }, auth), Code.NotFound);
  });
});

describe('ListTransactions', () => {
  // Ledger of a fresh organization: 7 ping rows at controlled times, three of them (of three
  // agents) at the same millisecond so paging must break ties by id. An agent's pings record at
  // most one row per PING_RECORD_INTERVAL_MS, so each agent's rows are that far apart.
  const S = PING_RECORD_INTERVAL_MS;
  let orgId: string;
  let agentA: string;
  let agentB: string;
  let all: Transaction[];

  beforeAll(async () => {
    const org = await newOrg('ledger');
    orgId = org.id;
    const { plaintextKey } = await admin.createApiKey({ orgId, mode: ApiKeyMode.TEST }, auth);
    agentA = (await admin.createAgent({ orgId, name: 'a' }, auth)).agent!.id;
    agentB = (await admin.createAgent({ orgId, name: 'b' }, auth)).agent!.id;
    const agentC = (await admin.createAgent({ orgId, name: 'c' }, auth)).agent!.id;
    const plan: Array<[number, string]> = [[0, agentA], [0, agentB], [0, agentC], [S, agentA], [2 * S, agentA], [2 * S, agentB], [3 * S, agentA]];
    const base = clock + 60_000;
    for (const [offset, agent] of plan) {
      clock = base + offset;
      expect((await ping(plaintextKey, agent)).status).toBe(200);
    }
    clock = base + 3 * S + 10_000;
    all = (await admin.listTransactions({ orgId }, auth)).transactions;
  });

  const at = (t: Transaction) => timestampMs(t.createdAt!);

  test('behavior: lists the organization\'s rows newest first, with (createdAt, id) descending', () => {
    expect(all).toHaveLength(7);
    for (const t of all) expect(t).toMatchObject({ orgId, type: 'ping', status: TransactionStatus.RECORDED, amountUsd: '0', chainId: 0, recipientAddress: '' });
    for (let i = 1; i < all.length; i++) {
      const [prev, cur] = [all[i - 1]!, all[i]!];
      expect(at(prev) > at(cur) || (at(prev) === at(cur) && prev.id > cur.id)).toBe(true);
    }
  });

  test('behavior: pageSize/nextPageToken walk every row exactly once across pages', async () => {
    const seen: string[] = [];
    const pageSizes: number[] = [];
    let pageToken = '';
    do {
      const page = await admin.listTransactions({ orgId, pageSize: 2, pageToken }, auth);
      pageSizes.push(page.transactions.length);
      seen.push(...page.transactions.map((t) => t.id));
      pageToken = page.nextPageToken;
    } while (pageToken !== '' && pageSizes.length < 10);
    expect(pageSizes).toEqual([2, 2, 2, 1]);
    expect(seen).toEqual(all.map((t) => t.id));
  });

  test('behavior: a page exactly filling the rest has no next token', async () => {
    const page = await admin.listTransactions({ orgId, pageSize: 7 }, auth);
    expect(page.transactions).toHaveLength(7);
    expect(page.nextPageToken).toBe('');
  });

  test('behavior: filters by agent, status and [from, to) and pages within the filter', async () => {
    const byB = await admin.listTransactions({ orgId, agentId: agentB }, auth);
    expect(byB.transactions.map((t) => t.id)).toEqual(all.filter((t) => t.agentId === agentB).map((t) => t.id));
    expect(byB.transactions).toHaveLength(2);

    const firstA = await admin.listTransactions({ orgId, agentId: agentA, pageSize: 3 }, auth);
    const restA = await admin.listTransactions({ orgId, agentId: agentA, pageSize: 3, pageToken: firstA.nextPageToken }, auth);
    expect([...firstA.transactions, ...restA.transactions].map((t) => t.id)).toEqual(all.filter((t) => t.agentId === agentA).map((t) => t.id));
    expect(restA.nextPageToken).toBe('');

    expect((await admin.listTransactions({ orgId, status: TransactionStatus.RECORDED }, auth)).transactions).toHaveLength(7);
    expect((await admin.listTransactions({ orgId, status: TransactionStatus.SIGNED }, auth)).transactions).toEqual([]);

    const base = at(all[all.length - 1]!);
    const window = await admin.listTransactions({ orgId, from: timestampFromMs(base + S), to: timestampFromMs(base + 3 * S) }, auth);
    expect(window.transactions.map(at)).toEqual([base + 2 * S, base + 2 * S, base + S]);
  });

  test('behavior: other organizations\' rows never appear', async () => {
    const other = await admin.listTransactions({ orgId: s.bootstrap.org_id, pageSize: 500 }, auth);
    const ids = new Set(all.map((t) => t.id));
    expect(other.transactions.some((t) => ids.has(t.id))).toBe(false);
    expect((await admin.listTransactions({ orgId, agentId: s.bootstrap.agent_id }, auth)).transactions).toEqual([]);
  });

  test('error: invalid_argument: malformed pageToken or pageSize over 500', async () => {
    const forged = Buffer.from(JSON.stringify(['x', 1])).toString('base64url');
    for (const pageToken of ['garbage!!', 'bm90IGpzb24', forged]) {
      await expectRpcError(admin.listTransactions({ orgId, pageToken }, auth), Code.InvalidArgument, /page_token is malformed/);
    }
    await expectRpcError(admin.listTransactions({ orgId, pageSize: 501 }, auth), Code.InvalidArgument, /page_size must be between 1 and 500/);
  });

  test('error: not_found: unknown organization', async () => {
    await expectRpcError(admin.listTransactions({ orgId: 'org_000000000000000000000000' }, auth), Code.NotFound);
  });
});
