import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ApiKeyMode, DashboardRole } from '../gen/paypolicy/v1/admin_pb.js';
import { adminFor, type Admin } from './helpers/admin.js';
import { expectRpcError } from './helpers/rpc.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/** Every List RPC of AdminService pages with page_size, page_token and next_page_token. */

let s: TestServer;
let admin: Admin;
let orgId: string;
let clock = Date.parse('2030-05-01T00:00:00Z');

beforeAll(async () => {
  s = await startTestServer({ now: () => clock });
  admin = adminFor(s);
  orgId = (await admin.client.createOrganization({ name: 'paged' }, admin.auth)).organization!.id;
  for (let i = 0; i < 5; i++) {
    clock += 1000;
    await admin.client.createAgent({ orgId, name: `agent-${i}` }, admin.auth);
    await admin.client.createApiKey({ orgId, mode: ApiKeyMode.TEST, label: `key-${i}` }, admin.auth);
    await admin.client.upsertService({ service: { slug: `svc-${i}`, name: `Service ${i}`, paymentMethods: [{ protocol: 'x402' }] }, orgId }, admin.auth);
    await admin.client.createDashboardUser({ orgId, email: `user-${i}@example.com`, role: DashboardRole.VIEWER, password: 'long enough password' }, admin.auth);
  }
});

afterAll(async () => {
  await s?.close();
});

/** Follows next_page_token with pages of `size`; returns the ids page by page. */
async function pages<R extends { nextPageToken: string }>(call: (page: { pageSize: number; pageToken: string }) => Promise<R>, ids: (r: R) => string[], size: number) {
  const out: string[][] = [];
  let pageToken = '';
  do {
    const r = await call({ pageSize: size, pageToken });
    out.push(ids(r));
    pageToken = r.nextPageToken;
  } while (pageToken !== '' && out.length < 20);
  return out;
}

describe('List RPC pagination', () => {
  test('behavior: ListAgents, ListApiKeys, ListServices, ListDashboardUsers and ListOrganizations page in order with no repeat or gap', async () => {
    const cases = [
      [(p: { pageSize: number; pageToken: string }) => admin.client.listAgents({ orgId, ...p }, admin.auth), (r: { agents: { id: string }[] }) => r.agents.map((a) => a.id)],
      [(p: { pageSize: number; pageToken: string }) => admin.client.listApiKeys({ orgId, ...p }, admin.auth), (r: { apiKeys: { id: string }[] }) => r.apiKeys.map((k) => k.id)],
      [(p: { pageSize: number; pageToken: string }) => admin.client.listServices({ orgId, ...p }, admin.auth), (r: { services: { slug: string }[] }) => r.services.map((x) => x.slug)],
      [(p: { pageSize: number; pageToken: string }) => admin.client.listDashboardUsers({ orgId, ...p }, admin.auth), (r: { users: { id: string }[] }) => r.users.map((u) => u.id)],
    ] as const;
    for (const [call, ids] of cases) {
      const all = (await pages(call as never, ids as never, 500)).flat();
      expect(all).toHaveLength(5);
      const paged = await pages(call as never, ids as never, 2);
      expect(paged.map((p) => p.length)).toEqual([2, 2, 1]);
      expect(paged.flat()).toEqual(all);
    }
    const orgs = (await pages((p) => admin.client.listOrganizations(p, admin.auth), (r) => r.organizations.map((o) => o.id), 1)).flat();
    expect(orgs).toContain(orgId);
    expect(new Set(orgs).size).toBe(orgs.length);
  });

  test('behavior: a row added before the cursor does not shift the next page (keyset, not offset)', async () => {
    const first = await admin.client.listApiKeys({ orgId, pageSize: 2 }, admin.auth);
    clock += 1000;
    await admin.client.createApiKey({ orgId, mode: ApiKeyMode.TEST, label: 'late' }, admin.auth);
    const rest = await admin.client.listApiKeys({ orgId, pageSize: 500, pageToken: first.nextPageToken }, admin.auth);
    const before = (await admin.client.listApiKeys({ orgId, pageSize: 500 }, admin.auth)).apiKeys.map((k) => k.id);
    // Newest first: the late key sorts before the cursor, so the second page is exactly the old tail.
    expect([...first.apiKeys, ...rest.apiKeys].map((k) => k.id)).toEqual(before.slice(1));
  });

  test('error: invalid_argument: page_size above 500 or a malformed page_token', async () => {
    await expectRpcError(admin.client.listAgents({ orgId, pageSize: 501 }, admin.auth), Code.InvalidArgument, /page_size must be between 1 and 500/);
    for (const pageToken of ['x', Buffer.from('[1]').toString('base64url'), Buffer.from('{"a":1}').toString('base64url')]) {
      await expectRpcError(admin.client.listAgents({ orgId, pageToken }, admin.auth), Code.InvalidArgument, /page_token is malformed/);
    }
  });
});
