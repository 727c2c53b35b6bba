import { Code, ConnectError } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService } from '../gen/paypolicy/v1/admin_pb.js';
import { MAX_PRIVATE_BASE_URLS, MAX_PRIVATE_RECORDS } from '../src/app/registry.js';
import { importServices } from '../src/app/serviceImport.js';
import { OPERATOR } from '../src/domain/types.js';
import { createUser, dashboardFetch, httpSignIn, importServicesJson, type HttpSession } from './dashboard/helpers.js';
import { adminFor, createTenant, type Admin, type Tenant } from './helpers/admin.js';
import { runCli } from './helpers/cli.js';
import { grpcChannel, grpcUnary } from './helpers/clients.js';
import { serviceRecord } from './helpers/registry.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * An organization's private registry is bounded (records, and base URLs across them) on every
 * surface that writes it: the dashboard's import and form, the AdminService over Connect and
 * gRPC, and the CLI. Past a bound the write is refused as invalid_argument naming the bound, and
 * nothing of it is kept; a write that stays within (replacing a record at the bound) goes through.
 */
const PASSWORD = 'correct horse battery staple';
const RECORDS_LIMIT = new RegExp(`at most ${MAX_PRIVATE_RECORDS} private registry records \\(this change would make ${MAX_PRIVATE_RECORDS + 1}\\)`);
const BASE_URLS_LIMIT = new RegExp(`at most ${MAX_PRIVATE_BASE_URLS} base URLs together \\(this change would make ${MAX_PRIVATE_BASE_URLS + 1}\\)`);

const record = (slug: string, baseUrls: number) => serviceRecord(slug, Array.from({ length: baseUrls }, (_, j) => `https://${slug}-${j}.example/v1`));

let s: TestServer;
let admin: Admin;
/** At the record bound: MAX_PRIVATE_RECORDS records of one base URL each. */
let manyRecords: Tenant;
/** At the base-URL bound: 20 base URLs a record. */
let manyUrls: Tenant;
let owner: HttpSession;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = adminFor(s);
  manyRecords = await createTenant(admin, 'limit-records');
  manyUrls = await createTenant(admin, 'limit-urls');
  await importServices(s.app.deps, OPERATOR, { orgId: manyRecords.orgId }, Array.from({ length: MAX_PRIVATE_RECORDS }, (_, i) => record(`r-${i}`, 1)));
  await importServices(s.app.deps, OPERATOR, { orgId: manyUrls.orgId }, Array.from({ length: MAX_PRIVATE_BASE_URLS / 20 }, (_, i) => record(`u-${i}`, 20)));
  await createUser(admin, manyRecords.orgId, 'owner@limits.example', 'owner', PASSWORD);
  owner = await httpSignIn(s.url, 'owner@limits.example', PASSWORD);
}, 60_000);
afterAll(async () => s?.close());

async function slugs(orgId: string): Promise<string[]> {
  const out: string[] = [];
  let pageToken = '';
  do {
    const r = await admin.client.listServices({ orgId, pageToken, pageSize: 500 }, admin.auth);
    out.push(...r.services.map((x) => x.slug));
    pageToken = r.nextPageToken;
  } while (pageToken !== '');
  return out;
}

const upload = (session: HttpSession, records: unknown[]) => importServicesJson(s.url, session, records);

describe('private registry bounds', () => {
  test('error: invalid_argument: the dashboard import past the record bound is 400 naming it, and writes none of its records', async () => {
    const r = await upload(owner, [{ slug: 'r-0', name: 'replaced' }, { slug: 'one-too-many', name: 'New' }]);
    expect(r.status).toBe(400);
    expect(await r.text()).toMatch(RECORDS_LIMIT);
    const now = await slugs(manyRecords.orgId);
    expect(now).toHaveLength(MAX_PRIVATE_RECORDS);
    expect(now).not.toContain('one-too-many');
    expect((await admin.client.listServices({ orgId: manyRecords.orgId, pageSize: 1 }, admin.auth)).services[0]).toMatchObject({ slug: 'r-0', name: 'r-0' });
  });

  test('error: invalid_argument: the dashboard form past the record bound is 400 naming it', async () => {
    const r = await dashboardFetch(s.url, owner, '/dashboard/services', { form: { _csrf: owner.csrf, mode: 'new', slug: 'form-new', name: 'Form', methods: '', endpoints: '' } });
    expect(r.status).toBe(400);
    expect(await r.text()).toMatch(RECORDS_LIMIT);
    expect(await slugs(manyRecords.orgId)).not.toContain('form-new');
  });

  test('behavior: at the bound a record can still be replaced', async () => {
    const r = await upload(owner, [{ slug: 'r-1', name: 'Replaced at the bound' }]);
    expect(r.status).toBe(303);
    expect(await slugs(manyRecords.orgId)).toHaveLength(MAX_PRIVATE_RECORDS);
  });

  test('error: invalid_argument: AdminService UpsertService over Connect past either bound, naming it', async () => {
    const refused = async (orgId: string, slug: string, pattern: RegExp) => {
      const err = await admin.client.upsertService({ orgId, service: { slug, name: slug, paymentMethods: [{ protocol: 'x402', baseUrl: 'https://new.example/v1', realm: '' }] } }, admin.auth).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectError);
      expect([(err as ConnectError).code, (err as ConnectError).rawMessage]).toEqual([Code.InvalidArgument, expect.stringMatching(pattern)]);
    };
    await refused(manyRecords.orgId, 'connect-new', RECORDS_LIMIT);
    await refused(manyUrls.orgId, 'connect-new', BASE_URLS_LIMIT);
    expect(await slugs(manyRecords.orgId)).not.toContain('connect-new');
    expect(await slugs(manyUrls.orgId)).not.toContain('connect-new');
  });

  test('error: INVALID_ARGUMENT: AdminService UpsertService over gRPC past the base-URL bound, naming it', async () => {
    const channel = grpcChannel(s.url);
    try {
      const r = await grpcUnary(channel, AdminService, AdminService.method.upsertService, {
        orgId: manyUrls.orgId, service: { slug: 'grpc-new', name: 'gRPC', paymentMethods: [{ protocol: 'x402', baseUrl: 'https://grpc.example/v1', realm: '' }] },
      }, s.bootstrap.admin_token);
      expect(r.ok ? 'ok' : [r.code, r.details]).toEqual([grpc.status.INVALID_ARGUMENT, expect.stringMatching(BASE_URLS_LIMIT)]);
    } finally {
      channel.close();
    }
    expect(await slugs(manyUrls.orgId)).not.toContain('grpc-new');
  });

  test('error: the CLI\'s service upsert past the record bound exits non-zero naming it', async () => {
    const r = await runCli(['service', 'upsert', '--org', manyRecords.orgId, '--slug', 'cli-new', '--name', 'CLI', '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(RECORDS_LIMIT);
    expect(await slugs(manyRecords.orgId)).not.toContain('cli-new');
  });

  test('behavior: the shared records (the operator\'s) and another organization are not bound by one organization\'s count', async () => {
    await admin.client.upsertService({ service: { slug: 'shared-after-bound', name: 'Shared' } }, admin.auth);
    const fresh = await createTenant(admin, 'limit-fresh');
    await admin.client.upsertService({ orgId: fresh.orgId, service: { slug: 'fresh-one', name: 'Fresh' } }, admin.auth);
    expect(await slugs(fresh.orgId)).toEqual(['fresh-one']);
  });
});
