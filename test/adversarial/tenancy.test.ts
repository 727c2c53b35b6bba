import * as grpc from '@grpc/grpc-js';
import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService } from '../../gen/paypolicy/v1/admin_pb.js';
import { PaymentPolicyService } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createAgent, createTenant, upsertService, type Admin, type Tenant } from '../helpers/admin.js';
import { runCliInProcess as runCli } from '../helpers/cliInProcess.js';
import { connectClient, grpcChannel, grpcUnary } from '../helpers/clients.js';
import { grpcWebUnary } from '../helpers/grpcWeb.js';
import { listAllTransactions, postSign, setPolicy } from '../helpers/payments.js';
import { PAY_TO, startX402Peer, type X402Peer } from '../helpers/peers.js';
import { bearer, expectRpcError } from '../helpers/rpc.js';
import { rest, startTestServer, type RestResult, type TestServer } from '../helpers/server.js';
import { createUser, dashboardFetch, httpSignIn, importServicesJson, type HttpSession } from '../dashboard/helpers.js';

/**
 * The service registry is a trust boundary (an allowlisted slug lets an agent pay whatever
 * answers under the service's base URL), so no tenant may change what another tenant's slugs
 * vouch for. Against the real server and a real x402 paywall: every write surface (dashboard
 * forms and import, REST, Connect, gRPC, gRPC-Web, the CLI) is tried by organization A against
 * the shared records and against organization B's private records; then the payments themselves
 * show that a private record attributes only its own organization's agents.
 */

const PASSWORD = 'long enough password';

let x402: X402Peer;
let s: TestServer;
let admin: Admin;
/** Organization A is the bootstrap organization; B is a second tenant. */
let orgA: string;
let keyA: string;
let b: Tenant;
let ownerA: HttpSession;
let ownerB: HttpSession;

beforeAll(async () => {
  x402 = await startX402Peer();
  s = await startTestServer({ dev: true, probeAllowHosts: [x402.host], logLevel: 'warn' });
  admin = adminFor(s);
  orgA = s.bootstrap.org_id;
  keyA = s.bootstrap.api_key;
  b = await createTenant(admin, 'tenant-b');
  await admin.client.provisionTreasury({ orgId: b.orgId }, admin.auth);
  await Promise.all([
    createUser(admin, orgA, 'owner-a@example.com', 'owner', PASSWORD),
    createUser(admin, b.orgId, 'owner-b@example.com', 'owner', PASSWORD),
  ]);
  [ownerA, ownerB] = await Promise.all([httpSignIn(s.url, 'owner-a@example.com', PASSWORD), httpSignIn(s.url, 'owner-b@example.com', PASSWORD)]);
  // The operator's shared record vouches for /svc on the paywall.
  await upsertService(admin, { slug: 'shared-svc', name: 'Shared Service', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }] });
});

afterAll(async () => {
  await s?.close();
  await x402?.close();
});

/** The records of one scope as the operator sees them: slug → [name, base URLs]. */
async function registry(orgId?: string): Promise<Record<string, [string, string[]]>> {
  const r = await admin.client.listServices({ orgId }, admin.auth);
  return Object.fromEntries(r.services.map((x) => [x.slug, [x.name, x.paymentMethods.map((m) => m.baseUrl)]]));
}

/** Everything the registry holds: shared, A's and B's private records. */
async function everything() {
  return { shared: await registry(), a: await registry(orgA), b: await registry(b.orgId) };
}

function serviceForm(session: HttpSession, fields: Record<string, string>) {
  return dashboardFetch(s.url, session, '/dashboard/services', { form: { _csrf: session.csrf, endpoints: '', ...fields } });
}

function importJson(session: HttpSession, records: unknown[]) {
  return importServicesJson(s.url, session, records);
}

function deleteForm(session: HttpSession, slug: string) {
  return dashboardFetch(s.url, session, `/dashboard/services/${slug}/delete`, { form: { _csrf: session.csrf } });
}

/** Runs the real CLI binary against the test server with the given token as the admin token. */
function cli(token: string, ...args: string[]) {
  return runCli([...args, '--url', s.url, '--admin-token', token]);
}

let agentCount = 0;
async function agentIn(orgId: string, allowlist: string[]): Promise<string> {
  const agentId = await createAgent(admin, orgId, `tenancy-${++agentCount}`);
  await setPolicy(admin, agentId, { allowlist, capUsd: '10', thresholdUsd: '1' });
  return agentId;
}

function signPaywall(key: string, agentId: string, url: string): Promise<RestResult> {
  return postSign(s.url, key, { agent_id: agentId, type: 'x402', chain_id: 84532, recipient_address: PAY_TO, amount_usd: 0.5, payload: { resource_url: url } });
}

function quote(key: string, agentId: string, url: string): Promise<RestResult> {
  return rest(s.url, 'POST', '/api/quote', { key, body: { agent_id: agentId, url }, headers: { connection: 'close' } });
}

async function ledgerSlugs(orgId: string, agentId: string): Promise<Array<[string | undefined, string]>> {
  return (await listAllTransactions(admin, orgId, agentId)).map((t) => [t.status, t.serviceSlug]);
}

describe('dashboard: an owner cannot write the shared registry', () => {
  test('error: edit, new-form, delete and import over a shared record are refused; the record is unchanged', async () => {
    const before = await everything();
    const view = await dashboardFetch(s.url, ownerA, '/dashboard/services/shared-svc');
    expect(view.status).toBe(200);
    const html = await view.text();
    expect(html).toContain('shared: managed by the server');
    expect(html).not.toContain('action="/dashboard/services"');
    expect(html).not.toContain('/dashboard/services/shared-svc/delete');

    const hostile = { name: 'Hijacked', methods: 'x402 https://attacker.example/' };
    const edit = await serviceForm(ownerA, { mode: 'edit', slug: 'shared-svc', ...hostile });
    expect(edit.status).toBe(409);
    expect(await edit.text()).toMatch(/id="svc-slug-error">slug shared-svc is a shared registry service; choose another slug for a private record/);
    expect((await serviceForm(ownerA, { mode: 'new', slug: 'shared-svc', ...hostile })).status).toBe(409);
    // Spelling tricks normalise to the same slug and are refused the same way.
    expect((await serviceForm(ownerA, { mode: 'edit', slug: ' shared-svc ', ...hostile })).status).toBe(409);

    const del = await deleteForm(ownerA, 'shared-svc');
    expect(del.status).toBe(409);
    expect(await del.text()).toMatch(/only the operator can change it/);

    // One record naming the shared slug rejects the whole import: nothing of it is written.
    const imp = await importJson(ownerA, [{ slug: 'innocent-one', name: 'Innocent' }, { slug: 'shared-svc', name: 'Hijacked', paymentMethods: [{ protocol: 'x402', baseUrl: 'https://attacker.example/', realm: '' }] }]);
    expect(imp.status).toBe(409);
    expect(await imp.text()).toMatch(/record 2 \(shared-svc\): slug shared-svc is a shared registry service/);

    expect(await everything()).toEqual(before);
    expect(before.shared['shared-svc']).toEqual(['Shared Service', [x402.url('/svc')]]);
  });

  test('behavior: the list shows shared records read-only to every organization', async () => {
    for (const owner of [ownerA, ownerB]) {
      const html = await (await dashboardFetch(s.url, owner, '/dashboard/services')).text();
      expect(html).toMatch(/<code>shared-svc<\/code><\/a><\/td>\s*<td>Shared Service<\/td>\s*<td><\/td>\s*<td><span class="muted">shared<\/span><\/td>/);
    }
  });
});

describe('dashboard: an owner cannot see or write another organization\'s private records', () => {
  beforeAll(async () => {
    const r = await serviceForm(ownerB, { mode: 'new', slug: 'b-private', name: 'B Private', methods: `x402 ${x402.url('/approval')}` });
    expect(r.status).toBe(303);
  });

  test('error: view and delete of B\'s record are 404 for A, exactly like an unknown slug', async () => {
    const view = await dashboardFetch(s.url, ownerA, '/dashboard/services/b-private');
    const unknown = await dashboardFetch(s.url, ownerA, '/dashboard/services/no-such-slug');
    expect([view.status, unknown.status]).toEqual([404, 404]);
    const del = await deleteForm(ownerA, 'b-private');
    const delUnknown = await deleteForm(ownerA, 'no-such-slug');
    expect([del.status, delUnknown.status]).toEqual([404, 404]);
    const page = async (r: Response) => (await r.text()).replace(/<meta name="server-now" content="\d+">/, '');
    expect(await page(del)).toBe((await page(delUnknown)).replaceAll('no-such-slug', 'b-private'));
    expect(await (await dashboardFetch(s.url, ownerA, '/dashboard/services')).text()).not.toContain('b-private');
    expect((await registry(b.orgId))['b-private']).toEqual(['B Private', [x402.url('/approval')]]);
  });

  test('behavior: A saving or importing the same slug makes A\'s own record; B\'s stays as it was', async () => {
    const edit = await serviceForm(ownerA, { mode: 'edit', slug: 'b-private', name: 'A Version', methods: 'x402 https://a.example/' });
    expect(edit.status).toBe(303);
    const imp = await importJson(ownerA, [{ slug: 'b-private', name: 'A Imported', paymentMethods: [{ protocol: 'x402', baseUrl: 'https://a.example/x', realm: '' }] }]);
    expect(imp.status).toBe(303);
    expect((await registry(orgA))['b-private']).toEqual(['A Imported', ['https://a.example/x']]);
    expect((await registry(b.orgId))['b-private']).toEqual(['B Private', [x402.url('/approval')]]);
    expect((await registry())['b-private']).toBeUndefined();
    // And A deleting "b-private" deletes A's own record only.
    expect((await deleteForm(ownerA, 'b-private')).status).toBe(303);
    expect((await registry(orgA))['b-private']).toBeUndefined();
    expect((await registry(b.orgId))['b-private']).toEqual(['B Private', [x402.url('/approval')]]);
  });
});

describe('API keys cannot write the registry on any transport', () => {
  const record = { slug: 'shared-svc', name: 'Hijacked', paymentMethods: [{ realm: '', baseUrl: 'https://attacker.example/', protocol: 'x402' }] };

  test('error: REST has no write route: every method on registry-like paths is 404 or 405 and changes nothing', async () => {
    const before = await everything();
    for (const path of ['/api/resolve?slug=shared-svc', '/api/services', '/api/services/shared-svc', '/api/registry', '/api/resolve/shared-svc']) {
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        const r = await rest(s.url, method, path, { key: keyA, body: record, headers: { connection: 'close' } });
        expect([404, 405], `${method} ${path}: ${r.status} ${r.text}`).toContain(r.status);
      }
    }
    expect(await everything()).toEqual(before);
  });

  test('error: Connect, gRPC and gRPC-Web AdminService calls with an API key are unauthenticated and change nothing', async () => {
    const before = await everything();
    const connect = connectClient(AdminService, s.url);
    for (const token of [keyA, b.apiKey]) {
      await expectRpcError(connect.upsertService({ service: record }, bearer(token)), Code.Unauthenticated);
      await expectRpcError(connect.upsertService({ service: { ...record, slug: 'b-private' }, orgId: b.orgId }, bearer(token)), Code.Unauthenticated);
      await expectRpcError(connect.deleteService({ slug: 'shared-svc' }, bearer(token)), Code.Unauthenticated);
      await expectRpcError(connect.deleteService({ slug: 'b-private', orgId: b.orgId }, bearer(token)), Code.Unauthenticated);
      await expectRpcError(connect.listServices({ orgId: b.orgId }, bearer(token)), Code.Unauthenticated);
    }
    // A dashboard session cookie is no admin credential either.
    await expectRpcError(connect.deleteService({ slug: 'shared-svc' }, { headers: { cookie: ownerA.cookie, connection: 'close' } }), Code.Unauthenticated);

    const channel = grpcChannel(s.url);
    try {
      const upsert = await grpcUnary(channel, AdminService, AdminService.method.upsertService, { service: record }, keyA);
      const del = await grpcUnary(channel, AdminService, AdminService.method.deleteService, { slug: 'b-private', orgId: b.orgId }, keyA);
      expect([upsert.ok ? 0 : upsert.code, del.ok ? 0 : del.code]).toEqual([grpc.status.UNAUTHENTICATED, grpc.status.UNAUTHENTICATED]);
    } finally {
      channel.close();
    }
    const web = await grpcWebUnary(s.url, AdminService.typeName, AdminService.method.deleteService, { slug: 'shared-svc' }, keyA);
    expect(web.grpcStatus).toBe(grpc.status.UNAUTHENTICATED);

    // The agent-facing service has no registry write at all.
    expect(Object.keys(PaymentPolicyService.method).filter((m) => /upsert|delete|import|service/i.test(m))).toEqual([]);
    expect(await everything()).toEqual(before);
  });

  test('error: AdminService registry calls need the admin token: none, a wrong one or an API key are refused', async () => {
    const connect = connectClient(AdminService, s.url);
    for (const options of [{ headers: { connection: 'close' } }, bearer('not-the-admin-token'), bearer(`${s.bootstrap.admin_token}x`)]) {
      await expectRpcError(connect.upsertService({ service: record }, options), Code.Unauthenticated);
      await expectRpcError(connect.deleteService({ slug: 'shared-svc' }, options), Code.Unauthenticated);
    }
  });

  test('error: the CLI with an API key as its admin token exits 1 and changes nothing', async () => {
    const before = await everything();
    const upsert = await cli(keyA, 'service', 'upsert', '--slug', 'shared-svc', '--name', 'Hijacked', '--base-url', 'https://attacker.example/', '--protocol', 'x402');
    const del = await cli(keyA, 'service', 'delete', '--slug', 'b-private', '--org', b.orgId);
    expect([upsert.code, del.code]).toEqual([1, 1]);
    expect(upsert.stderr).toMatch(/unauthenticated/i);
    expect(await everything()).toEqual(before);
  });
});

describe('operator: shared and private records through AdminService and the CLI', () => {
  test('behavior: the CLI writes, lists and deletes a private record with --org; shared list is untouched', async () => {
    const token = s.bootstrap.admin_token;
    const up = await cli(token, 'service', 'upsert', '--org', b.orgId, '--slug', 'cli-private', '--name', 'CLI Private', '--base-url', 'https://cli.example/', '--protocol', 'x402');
    expect(up.code, up.stderr).toBe(0);
    expect((await cli(token, 'service', 'list', '--org', b.orgId)).stdout).toMatch(/^cli-private\s+CLI Private/m);
    expect((await cli(token, 'service', 'list')).stdout).not.toContain('cli-private');
    expect((await cli(token, 'service', 'delete', '--slug', 'cli-private')).code).toBe(1);
    const del = await cli(token, 'service', 'delete', '--slug', 'cli-private', '--org', b.orgId);
    expect(del.code, del.stderr).toBe(0);
    expect((await registry(b.orgId))['cli-private']).toBeUndefined();
  });

  test('error: a private slug may not equal a shared one, nor a shared slug a private one; unknown org is not_found', async () => {
    await expectRpcError(admin.client.upsertService({ service: { slug: 'shared-svc', name: 'X' }, orgId: b.orgId }, admin.auth), Code.AlreadyExists, /slug shared-svc is a shared registry service/);
    await expectRpcError(admin.client.upsertService({ service: { slug: 'b-private', name: 'X' } }, admin.auth), Code.AlreadyExists, new RegExp(`slug b-private is held by private records of ${b.orgId}; delete those first`));
    await expectRpcError(admin.client.upsertService({ service: { slug: 'ghost', name: 'X' }, orgId: 'org_doesnotexist' }, admin.auth), Code.NotFound);
    await expectRpcError(admin.client.deleteService({ slug: 'b-private' }, admin.auth), Code.NotFound);
    expect((await registry(b.orgId))['b-private']).toEqual(['B Private', [x402.url('/approval')]]);
    expect((await registry())['b-private']).toBeUndefined();
  });
});

describe('a private record attributes its own organization\'s payments only', () => {
  test('behavior: A\'s agent pays through A\'s private slug; B\'s agent allowlisting the same slug gets no attribution', async () => {
    const made = await serviceForm(ownerA, { mode: 'new', slug: 'a-weather', name: 'A Weather', methods: `x402 ${x402.url('/paid')}` });
    expect(made.status).toBe(303);
    const url = x402.url('/paid');
    const agentA = await agentIn(orgA, ['a-weather']);
    const agentB = await agentIn(b.orgId, ['a-weather']);

    const paidA = await signPaywall(keyA, agentA, url);
    expect(paidA.status, paidA.text).toBe(200);
    const deniedB = await signPaywall(b.apiKey, agentB, url);
    expect(deniedB.status, deniedB.text).toBe(403);
    expect(deniedB.json.reason).toBe(`Recipient ${PAY_TO.toLowerCase()} is not on the agent's allowlist: allowlisted service a-weather is not in the registry`);
    expect(await ledgerSlugs(orgA, agentA)).toEqual([['signed', 'a-weather']]);
    expect(await ledgerSlugs(b.orgId, agentB)).toEqual([['denied', '']]);

    const quoteA = await quote(keyA, agentA, url);
    const quoteB = await quote(b.apiKey, agentB, url);
    expect([quoteA.json.recipient.slug, quoteB.json.recipient.slug]).toEqual(['a-weather', null]);
    expect([quoteA.json.status, quoteB.json.status]).toEqual(['allowed', 'denied']);
  });

  test('behavior: /api/resolve and Connect Resolve show an organization its own private records and never another\'s', async () => {
    const resolveA = await rest(s.url, 'GET', '/api/resolve?slugs=a-weather,b-private,shared-svc', { key: keyA, headers: { connection: 'close' } });
    const resolveB = await rest(s.url, 'GET', '/api/resolve?slugs=a-weather,b-private,shared-svc', { key: b.apiKey, headers: { connection: 'close' } });
    const names = (r: RestResult) => Object.fromEntries(Object.entries(r.json.results as Record<string, { name: string } | null>).map(([k, v]) => [k, v?.name ?? null]));
    expect(names(resolveA)).toEqual({ 'a-weather': 'A Weather', 'b-private': null, 'shared-svc': 'Shared Service' });
    expect(names(resolveB)).toEqual({ 'a-weather': null, 'b-private': 'B Private', 'shared-svc': 'Shared Service' });
    // The record's JSON is the wire protocol's: no scope field leaks into it.
    expect(Object.keys(resolveA.json.results['a-weather'])).toEqual(['id', 'slug', 'name', 'description', 'category', 'logoUrl', 'docsUrl', 'paymentMethods', 'endpoints']);
    const rpc = await connectClient(PaymentPolicyService, s.url).resolve({ slugs: ['a-weather', 'b-private'] }, bearer(b.apiKey));
    expect(rpc.results.map((r) => [r.slug, r.service?.name ?? null])).toEqual([['a-weather', null], ['b-private', 'B Private']]);
  });

  test('behavior: the same private slug in two organizations: each organization\'s record vouches for its own agents only', async () => {
    expect((await serviceForm(ownerA, { mode: 'new', slug: 'dup', name: 'A Dup', methods: `x402 ${x402.url('/changing')}` })).status).toBe(303);
    expect((await serviceForm(ownerB, { mode: 'new', slug: 'dup', name: 'B Dup', methods: `x402 ${x402.url('/unknown-asset')}` })).status).toBe(303);
    const agentA = await agentIn(orgA, ['dup']);
    const agentB = await agentIn(b.orgId, ['dup']);
    // B's "dup" does not widen A's: A's agent cannot pay B's URL, and B's cannot pay A's.
    const url = x402.url('/changing');
    expect((await signPaywall(keyA, agentA, url)).status).toBe(200);
    const deniedB = await signPaywall(b.apiKey, agentB, url);
    expect(deniedB.status, deniedB.text).toBe(403);
    expect(deniedB.json.reason).toMatch(/not under a registered base URL of allowlisted service dup/);
  });

  test('behavior: a private record claiming a shared service\'s URL never takes it over: the shared record wins, for everyone', async () => {
    expect((await serviceForm(ownerA, { mode: 'new', slug: 'a-claim', name: 'A Claim', methods: `x402 ${x402.url('/svc')}` })).status).toBe(303);
    const url = x402.url('/svc/paid');
    const claimant = await agentIn(orgA, ['a-claim']);
    const sharedA = await agentIn(orgA, ['shared-svc']);
    const sharedB = await agentIn(b.orgId, ['shared-svc']);
    const claimed = await signPaywall(keyA, claimant, url);
    expect(claimed.status, claimed.text).toBe(403);
    expect(claimed.json.reason).toMatch(/belongs to registered service shared-svc, not to allowlisted service a-claim/);
    expect((await signPaywall(keyA, sharedA, url)).status).toBe(200);
    expect((await signPaywall(b.apiKey, sharedB, url)).status).toBe(200);
    expect(await ledgerSlugs(b.orgId, sharedB)).toEqual([['signed', 'shared-svc']]);
  });
});
