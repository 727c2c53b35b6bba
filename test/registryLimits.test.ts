import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { createClient } from '@paypolicy/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService } from '../gen/paypolicy/v1/admin_pb.js';
import { PaymentPolicyService } from '../gen/paypolicy/v1/payment_policy_pb.js';
import {
  MAX_ENDPOINT_DESCRIPTION_CHARS, MAX_ENDPOINT_PATH_CHARS, MAX_ENDPOINTS, MAX_LIST_PAGE_BYTES, MAX_PRIVATE_BASE_URLS, MAX_PRIVATE_BYTES, MAX_PRIVATE_RECORDS,
  MAX_RECORD_BYTES, MAX_RESOLVE_BYTES, MAX_URL_CHARS,
} from '../src/app/registry/registry.js';
import { importServices } from '../src/app/registry/serviceImport.js';
import { OPERATOR, type ServiceRecord } from '../src/domain/types.js';
import { createUser, dashboardFetch, httpSignIn, importServicesJson, type HttpSession } from './dashboard/helpers.js';
import { adminFor, createTenant, type Admin, type Tenant } from './helpers/admin.js';
import { runCliInProcess as runCli } from './helpers/cliInProcess.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { serviceRecord, sizedRecord } from './helpers/registry.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

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

/** A domain record as the AdminService's ServiceRecord message. */
const toProto = (r: ServiceRecord) => ({ ...r, endpoints: r.endpoints.map((e) => ({ ...e, priceAtomic: e.priceAtomic ?? undefined })) });
const BYTES_LIMIT = new RegExp(`may take at most ${MAX_PRIVATE_BYTES} bytes stored together \\(this change would make \\d+\\)`);
const RECORD_LIMIT = new RegExp(`a registry record may take at most ${MAX_RECORD_BYTES} bytes stored \\(this one would take ${MAX_RECORD_BYTES + 1}\\)`);
/** Records at the per-record bound making `total` stored bytes together. */
const recordsOf = (prefix: string, total: number) =>
  Array.from({ length: Math.ceil(total / MAX_RECORD_BYTES) }, (_, i) => sizedRecord(`${prefix}-${i}`, Math.min(MAX_RECORD_BYTES, total - i * MAX_RECORD_BYTES)));
const usage = (orgId: string) => s.app.deps.store.services.usage(orgId);

/**
 * The private registry is bounded in stored bytes too (domain/recordBytes.ts): a record at most
 * MAX_RECORD_BYTES (shared ones included), an organization's records MAX_PRIVATE_BYTES together,
 * each field within its own bound. Every writing surface refuses past a bound with
 * invalid_argument / registry_limit naming it, and keeps nothing; a resolve answers at most
 * MAX_RESOLVE_BYTES of records; a listing page carries at most MAX_LIST_PAGE_BYTES of them.
 */
describe('private registry byte bounds', () => {
  /** 512 bytes short of the organization's byte bound. */
  let fullBytes: Tenant;
  let bytesOwner: HttpSession;
  beforeAll(async () => {
    fullBytes = await createTenant(admin, 'limit-bytes');
    await importServices(s.app.deps, OPERATOR, { orgId: fullBytes.orgId }, recordsOf('b', MAX_PRIVATE_BYTES - 512));
    await createUser(admin, fullBytes.orgId, 'owner@bytes.example', 'owner', PASSWORD);
    bytesOwner = await httpSignIn(s.url, 'owner@bytes.example', PASSWORD);
  }, 60_000);

  test('error: registry_limit: the dashboard import past the byte bound is 400 naming it, and writes none of its records', async () => {
    // The first record replaces one by as large a one; the second is new and passes the bound.
    const r = await upload(bytesOwner, [{ ...sizedRecord('b-0', MAX_RECORD_BYTES), name: 'B-0' }, sizedRecord('b-new', 1024)]);
    expect(r.status).toBe(400);
    expect(await r.text()).toMatch(BYTES_LIMIT);
    expect(await usage(fullBytes.orgId)).toMatchObject({ bytes: MAX_PRIVATE_BYTES - 512 });
    expect((await s.app.deps.store.services.get('b-0', fullBytes.orgId))?.name).toBe('b-0');
    expect(await s.app.deps.store.services.get('b-new', fullBytes.orgId)).toBeUndefined();
  });

  test('error: registry_limit: a dashboard import holding one record past the per-record bound is 400 naming the record, and writes nothing', async () => {
    const fresh = await createTenant(admin, 'limit-record');
    await createUser(admin, fresh.orgId, 'owner@record.example', 'owner', PASSWORD);
    const owner = await httpSignIn(s.url, 'owner@record.example', PASSWORD);
    const r = await upload(owner, [serviceRecord('fine', []), sizedRecord('too-big', MAX_RECORD_BYTES + 1)]);
    expect(r.status).toBe(400);
    const page = await r.text();
    expect(page).toMatch(/record 2 \(too-big\): /);
    expect(page).toMatch(RECORD_LIMIT);
    expect(await usage(fresh.orgId)).toEqual({ records: 0, baseUrls: 0, bytes: 0 });
  });

  test('error: registry_limit: the dashboard form past the byte bound is 400 naming it; a field past its bound is named at its field', async () => {
    const form = (fields: Record<string, string>) => dashboardFetch(s.url, bytesOwner, '/dashboard/services', {
      form: { _csrf: bytesOwner.csrf, mode: 'new', name: 'Form', methods: '', endpoints: '', ...fields },
    });
    const r = await form({ slug: 'form-bytes', description: 'd'.repeat(1000) });
    expect(r.status).toBe(400);
    expect(await r.text()).toMatch(BYTES_LIMIT);
    const long = await form({ slug: 'form-long', endpoints: JSON.stringify([{ method: 'GET', path: `/${'p'.repeat(MAX_ENDPOINT_PATH_CHARS)}` }]) });
    expect(long.status).toBe(400);
    expect(await long.text()).toContain(`endpoints[0].path must be at most ${MAX_ENDPOINT_PATH_CHARS} characters`);
    expect((await usage(fullBytes.orgId)).records).toBe(Math.ceil((MAX_PRIVATE_BYTES - 512) / MAX_RECORD_BYTES));
  });

  test('error: invalid_argument: AdminService UpsertService over Connect past the per-record bound (shared or private), the byte bound or a field bound, naming it', async () => {
    const refused = async (orgId: string, record: ServiceRecord, pattern: RegExp | string) => {
      const err = await admin.client.upsertService({ orgId, service: toProto(record) }, admin.auth).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectError);
      expect([(err as ConnectError).code, (err as ConnectError).rawMessage]).toEqual([Code.InvalidArgument, typeof pattern === 'string' ? expect.stringContaining(pattern) : expect.stringMatching(pattern)]);
      expect((err as ConnectError).metadata.get('x-error-code')).toBe(typeof pattern === 'string' ? 'invalid_argument' : 'registry_limit');
    };
    await refused('', sizedRecord('shared-too-big', MAX_RECORD_BYTES + 1), RECORD_LIMIT);
    await refused(fullBytes.orgId, sizedRecord('connect-too-big', MAX_RECORD_BYTES + 1), RECORD_LIMIT);
    await refused(fullBytes.orgId, sizedRecord('connect-new', 1024), BYTES_LIMIT);
    const endpoint = { method: 'GET', path: '/x', description: '', priceAtomic: null, currency: '', pricingModel: '', protocol: '' };
    const fields: Array<[Partial<ServiceRecord>, string]> = [
      [{ endpoints: Array.from({ length: MAX_ENDPOINTS + 1 }, () => endpoint) }, `endpoints must have at most ${MAX_ENDPOINTS} entries`],
      [{ endpoints: [{ ...endpoint, path: `/${'p'.repeat(MAX_ENDPOINT_PATH_CHARS)}` }] }, `endpoints[0].path must be at most ${MAX_ENDPOINT_PATH_CHARS} characters`],
      [{ endpoints: [{ ...endpoint, description: 'd'.repeat(MAX_ENDPOINT_DESCRIPTION_CHARS + 1) }] }, `endpoints[0].description must be at most ${MAX_ENDPOINT_DESCRIPTION_CHARS} characters`],
      [{ paymentMethods: [{ protocol: 'x402', realm: '', baseUrl: `https://long.example/${'u'.repeat(MAX_URL_CHARS)}` }] }, `payment_methods[0].base_url must be at most ${MAX_URL_CHARS} characters`],
      [{ docsUrl: `https://long.example/${'u'.repeat(MAX_URL_CHARS)}` }, `docs_url must be at most ${MAX_URL_CHARS} characters`],
    ];
    for (const [change, message] of fields) await refused('', { ...serviceRecord('field-bound', []), ...change }, message);
    expect(await s.app.deps.store.services.get('shared-too-big', null)).toBeUndefined();
    expect(await s.app.deps.store.services.get('field-bound', null)).toBeUndefined();
    expect(await usage(fullBytes.orgId)).toMatchObject({ bytes: MAX_PRIVATE_BYTES - 512 });
  });

  test('error: INVALID_ARGUMENT: AdminService UpsertService over gRPC past the per-record and the byte bound, naming each', async () => {
    const channel = grpcChannel(s.url);
    try {
      for (const [record, pattern] of [[sizedRecord('grpc-too-big', MAX_RECORD_BYTES + 1), RECORD_LIMIT], [sizedRecord('grpc-new', 1024), BYTES_LIMIT]] as const) {
        const r = await grpcUnary(channel, AdminService, AdminService.method.upsertService, { orgId: fullBytes.orgId, service: toProto(record) }, s.bootstrap.admin_token);
        expect(r.ok ? 'ok' : [r.code, r.details, r.metadata.get('x-error-code')]).toEqual([grpc.status.INVALID_ARGUMENT, expect.stringMatching(pattern), ['registry_limit']]);
      }
    } finally {
      channel.close();
    }
    expect(await usage(fullBytes.orgId)).toMatchObject({ bytes: MAX_PRIVATE_BYTES - 512 });
  });

  test('error: the CLI\'s service upsert past the per-record bound (--file) and the byte bound (--org) exits non-zero naming each', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-registry-bytes-'));
    try {
      const file = join(dir, 'big.json');
      writeFileSync(file, JSON.stringify(sizedRecord('cli-too-big', MAX_RECORD_BYTES + 1)));
      const big = await runCli(['service', 'upsert', '--file', file, '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
      expect(big.code).not.toBe(0);
      expect(big.stderr).toMatch(RECORD_LIMIT);
      const past = await runCli(['service', 'upsert', '--org', fullBytes.orgId, '--slug', 'cli-new', '--name', 'CLI', '--description', 'd'.repeat(1000),
        '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
      expect(past.code).not.toBe(0);
      expect(past.stderr).toMatch(BYTES_LIMIT);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await s.app.deps.store.services.get('cli-too-big', null)).toBeUndefined();
    expect(await s.app.deps.store.services.get('cli-new', fullBytes.orgId)).toBeUndefined();
  });

  test('behavior: at the byte bound a record can be replaced by one as large; an organization past it (from before the bound) can shrink, not grow', async () => {
    expect((await upload(bytesOwner, [{ ...sizedRecord('b-1', MAX_RECORD_BYTES), name: 'B-1' }])).status).toBe(303);
    expect(await usage(fullBytes.orgId)).toMatchObject({ bytes: MAX_PRIVATE_BYTES - 512 });

    // A registry stored before the byte bound existed: written past it through the store itself.
    const over = await createTenant(admin, 'limit-over');
    await s.app.deps.uow.write(async (tx) => {
      for (const r of recordsOf('o', MAX_PRIVATE_BYTES + 2 * MAX_RECORD_BYTES)) await tx.services.upsert(r, over.orgId, 1);
    });
    const upsert = (record: ServiceRecord) => admin.client.upsertService({ orgId: over.orgId, service: toProto(record) }, admin.auth);
    await expect(upsert(sizedRecord('o-new', 100))).rejects.toThrow(BYTES_LIMIT);
    await expect(upsert({ ...sizedRecord('o-0', MAX_RECORD_BYTES - 1000), endpoints: [] , description: '' }).then(() => 'shrunk')).resolves.toBe('shrunk');
    const shrunk = (await usage(over.orgId)).bytes;
    expect(shrunk).toBeGreaterThan(MAX_PRIVATE_BYTES);
    await expect(upsert(sizedRecord('o-0', 2000))).rejects.toThrow(BYTES_LIMIT);
    expect((await usage(over.orgId)).bytes).toBe(shrunk);
  });

  test('behavior: concurrent upserts that each fit alone but not together: one is kept, the others refused, the total within the bound', async () => {
    const race = await createTenant(admin, 'limit-race');
    await importServices(s.app.deps, OPERATOR, { orgId: race.orgId }, recordsOf('r', MAX_PRIVATE_BYTES - MAX_RECORD_BYTES - 100));
    const outcomes = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      admin.client.upsertService({ orgId: race.orgId, service: toProto(sizedRecord(`race-${i}`, MAX_RECORD_BYTES)) }, admin.auth)
        .then(() => 'kept', (e: unknown) => (e instanceof ConnectError && BYTES_LIMIT.test(e.rawMessage) ? 'refused' : String(e)))));
    expect(outcomes.filter((o) => o === 'kept')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'refused')).toHaveLength(7);
    expect((await usage(race.orgId)).bytes).toBe(MAX_PRIVATE_BYTES - 100);
  });

  test('error: invalid_argument: a resolve past MAX_RESOLVE_BYTES of records is resolve_too_large on REST, Connect, gRPC and the client, one at the bound is answered', async () => {
    const fitting = MAX_RESOLVE_BYTES / MAX_RECORD_BYTES;
    const slugs = Array.from({ length: fitting + 1 }, (_, i) => `b-${i}`);
    const at = await rest(s.url, 'GET', `/api/resolve?slugs=${slugs.slice(0, fitting).join(',')}`, { key: fullBytes.apiKey });
    expect([at.status, at.json.resolvedCount]).toEqual([200, fitting]);
    const past = await rest(s.url, 'GET', `/api/resolve?slugs=${slugs.join(',')}`, { key: fullBytes.apiKey });
    expect([past.status, past.json.code, past.json.error]).toEqual([400, 'resolve_too_large', expect.stringContaining(`more than the ${MAX_RESOLVE_BYTES} one resolve answers`)]);
    const bearer = { headers: { authorization: `Bearer ${fullBytes.apiKey}` } };
    const c = await connectClient(PaymentPolicyService, s.url).resolve({ slugs }, bearer).catch((e: unknown) => e);
    expect([(c as ConnectError).code, (c as ConnectError).metadata.get('x-error-code')]).toEqual([Code.InvalidArgument, 'resolve_too_large']);
    const channel = grpcChannel(s.url);
    try {
      const g = await grpcUnary(channel, PaymentPolicyService, PaymentPolicyService.method.resolve, { slugs }, fullBytes.apiKey);
      expect(g.ok ? 'ok' : [g.code, g.metadata.get('x-error-code')]).toEqual([grpc.status.INVALID_ARGUMENT, ['resolve_too_large']]);
    } finally {
      channel.close();
    }
    const client = createClient({ baseUrl: s.url, apiKey: fullBytes.apiKey });
    expect(await client.resolve(slugs).catch((e: unknown) => e)).toMatchObject({ code: 'resolve_too_large', status: 400 });
  });

  test('behavior: ListServices pages stop at MAX_LIST_PAGE_BYTES of records, and every record is listed across the pages (CLI too)', async () => {
    const first = await admin.client.listServices({ orgId: fullBytes.orgId, pageSize: 500 }, admin.auth);
    expect(first.services).toHaveLength(MAX_LIST_PAGE_BYTES / MAX_RECORD_BYTES);
    expect(first.nextPageToken).not.toBe('');
    expect(first.services[0]!.endpoints.length).toBeGreaterThan(0);
    const all = await slugs(fullBytes.orgId);
    expect(all).toHaveLength(Math.ceil((MAX_PRIVATE_BYTES - 512) / MAX_RECORD_BYTES));
    const cli = await runCli(['service', 'list', '--org', fullBytes.orgId, '--url', s.url, '--admin-token', s.bootstrap.admin_token, '--json']);
    expect(cli.code, cli.stderr).toBe(0);
    expect((JSON.parse(cli.stdout) as { services: Array<{ slug: string }> }).services.map((x) => x.slug)).toEqual(all);
  });
});

describe('an import names each slug once', () => {
  test('error: duplicate_slug: a dashboard import holding a slug twice is 400 naming both records, and writes nothing', async () => {
    const tenant = await createTenant(admin, 'dup-slug-import');
    await createUser(admin, tenant.orgId, 'owner@dup-slug.example', 'owner', PASSWORD);
    const session = await httpSignIn(s.url, 'owner@dup-slug.example', PASSWORD);
    const r = await upload(session, [{ slug: 'dup', name: 'A' }, { slug: 'other', name: 'O' }, { slug: 'dup', name: 'B' }]);
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('record 3 (dup): the slug of record 1 again; an import holds each slug once');
    expect(await slugs(tenant.orgId)).toEqual([]);
  });

  test('error: a file and pasted JSON together, or a file under another part name, are 400 and import nothing', async () => {
    const tenant = await createTenant(admin, 'ambiguous-import');
    await createUser(admin, tenant.orgId, 'owner@ambiguous.example', 'owner', PASSWORD);
    const session = await httpSignIn(s.url, 'owner@ambiguous.example', PASSWORD);
    const post = (parts: Array<{ name: string; file?: string; value: string }>) => {
      const b = 'XambiguousBoundary';
      const body = [{ name: '_csrf', value: session.csrf }, ...parts].map((p) =>
        `--${b}\r\nContent-Disposition: form-data; name="${p.name}"${p.file ? `; filename="${p.file}"\r\nContent-Type: application/json` : ''}\r\n\r\n${p.value}\r\n`).join('') + `--${b}--\r\n`;
      return fetch(`${s.url}/dashboard/services/import`, {
        method: 'POST', redirect: 'manual', body,
        headers: { cookie: session.cookie, 'content-type': `multipart/form-data; boundary=${b}`, connection: 'close' },
      });
    };
    const both = await post([{ name: 'file', file: 'a.json', value: JSON.stringify([{ slug: 'from-file', name: 'F' }]) }, { name: 'json', value: JSON.stringify([{ slug: 'from-paste', name: 'P' }]) }]);
    expect(both.status).toBe(400);
    expect(await both.text()).toContain('choose a JSON file or paste JSON, not both');
    const elsewhere = await post([{ name: 'other', file: 'a.json', value: JSON.stringify([{ slug: 'from-other', name: 'O' }]) }]);
    expect(elsewhere.status).toBe(400);
    expect(await elsewhere.text()).toContain('Unknown form field &quot;other&quot;');
    expect(await slugs(tenant.orgId)).toEqual([]);
  });
});
