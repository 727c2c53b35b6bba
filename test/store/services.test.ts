import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { openDatabase, writeTxn, type Db } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { createServiceStore } from '../../src/store/services.js';
import type { ServiceRecord } from '../../src/domain/types.js';

const dirs: string[] = [];
function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-services-'));
  dirs.push(dir);
  return join(dir, 'paypolicy.db');
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

let seq = 0;
function record(slug: string, baseUrl = `https://${slug}.example/`): ServiceRecord {
  seq++;
  return {
    id: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`, slug, name: slug, description: '', category: '', logoUrl: '', docsUrl: '',
    paymentMethods: [{ realm: '', baseUrl, protocol: 'x402' }], endpoints: [],
  };
}

function withOrgs(db: Db, ...ids: string[]): Db {
  for (const id of ids) db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, 3600, 0)').run(id, id);
  return db;
}

function insertRaw(db: Db, orgId: string | null, slug: string): void {
  db.prepare(`INSERT INTO services (id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, created_at, updated_at)
    VALUES (?, ?, ?, 'raw', '', '', '', '', '[]', '[]', 0, 0)`).run(`raw-${++seq}`, orgId, slug);
}

describe('migration 0003_private_services', () => {
  test('behavior: records of a registry from before private records stay shared, ids kept', () => {
    const file = tempDb();
    const old = new Database(file);
    old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const m of MIGRATIONS.filter((x) => x.version < 3)) {
      old.exec(m.sqlite);
      old.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
    }
    old.prepare(`INSERT INTO services (id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, created_at, updated_at)
      VALUES ('kept-id', 'weather', 'Weather', '', '', '', '', '[{"realm":"","baseUrl":"https://w.example/","protocol":"x402"}]', '[]', 1, 2)`).run();
    old.close();

    const db = withOrgs(openDatabase(file), 'org_a');
    const services = createServiceStore(db);
    expect(services.range(null, 'a', 'z').map((s) => [s.id, s.slug, s.orgId])).toEqual([['kept-id', 'weather', null]]);
    expect(services.visibleSummaries('org_a').map((s) => s.slug)).toEqual(['weather']);
    db.close();
  });
});

describe('migration 0013_registry_scopes', () => {
  test('behavior: each existing record\'s base URLs are counted for the organization\'s bounds', () => {
    const file = tempDb();
    const old = new Database(file);
    old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const m of MIGRATIONS.filter((x) => x.version < 13)) {
      old.exec(m.sqlite);
      old.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
    }
    old.prepare("INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES ('org_a', 'org_a', 3600, 0)").run();
    const methods = JSON.stringify([{ realm: '', baseUrl: 'https://a.example/', protocol: 'x402' }, { realm: '', baseUrl: '', protocol: 'mpp' }, { realm: 'r', baseUrl: 'https://b.example/', protocol: 'mpp' }]);
    old.prepare(`INSERT INTO services (id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, created_at, updated_at)
      VALUES ('one', 'org_a', 'one', 'One', '', '', '', '', ?, '[]', 1, 2), ('two', 'org_a', 'two', 'Two', '', '', '', '', '[]', '[]', 1, 2)`).run(methods);
    old.close();

    const db = openDatabase(file);
    const bytes = 'oneOne'.length + methods.length + '[]'.length + 'twoTwo'.length + '[][]'.length;
    expect(createServiceStore(db).usage('org_a')).toEqual({ records: 2, baseUrls: 2, bytes });
    db.close();
  });
});

describe('migration 0014_registry_endpoint_counts', () => {
  test('behavior: each existing record keeps every field and has its endpoints counted; summaries read them without the endpoints', () => {
    const file = tempDb();
    const old = new Database(file);
    old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    for (const m of MIGRATIONS.filter((x) => x.version < 14)) {
      old.exec(m.sqlite);
      old.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name);
    }
    old.prepare("INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES ('org_a', 'org_a', 3600, 0)").run();
    const methods = JSON.stringify([{ realm: '', baseUrl: 'https://a.example/', protocol: 'x402' }]);
    const endpoints = JSON.stringify([{ method: 'GET', path: '/a', description: 'é', priceAtomic: '1', currency: 'USDC', pricingModel: 'fixed', protocol: 'x402' },
      { method: 'POST', path: '/b', description: '', priceAtomic: null, currency: '', pricingModel: '', protocol: '' }]);
    old.prepare(`INSERT INTO services (id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, base_urls, created_at, updated_at)
      VALUES ('one', 'org_a', 'one', 'One', 'about one', 'data', 'https://l.example/', 'https://d.example/', ?, ?, 1, 1, 2),
             ('two', NULL, 'two', 'Two', '', '', '', '', '[]', '[]', 0, 3, 4)`).run(methods, endpoints);
    old.close();

    const db = openDatabase(file);
    const services = createServiceStore(db);
    expect(services.get('one', 'org_a')).toEqual({
      id: 'one', orgId: 'org_a', slug: 'one', name: 'One', description: 'about one', category: 'data', logoUrl: 'https://l.example/', docsUrl: 'https://d.example/',
      paymentMethods: JSON.parse(methods), endpoints: JSON.parse(endpoints),
    });
    const bytes = Buffer.byteLength('oneOneabout onedatahttps://l.example/https://d.example/' + methods + endpoints);
    expect(services.summaries('org_a')).toEqual([{
      orgId: 'org_a', slug: 'one', name: 'One', category: 'data', docsUrl: 'https://d.example/', paymentMethods: JSON.parse(methods), endpointCount: 2, bytes,
    }]);
    expect(services.summaries(null).map((s) => [s.slug, s.endpointCount])).toEqual([['two', 0]]);
    expect(services.usage('org_a')).toEqual({ records: 1, baseUrls: 1, bytes });
    expect(() => insertRaw(db, 'org_a', 'two')).toThrow(/registry slug is shared/);
    db.close();
  });
});

describe('the schema alone keeps one record per slug in every organization\'s view', () => {
  test('error: a private slug equal to a shared one, or a shared slug equal to a private one, is refused by SQLite', () => {
    const db = withOrgs(openDatabase(tempDb()), 'org_a', 'org_b');
    insertRaw(db, null, 'shared');
    insertRaw(db, 'org_a', 'mine');
    expect(() => insertRaw(db, 'org_b', 'shared')).toThrow(/registry slug is shared/);
    expect(() => insertRaw(db, null, 'mine')).toThrow(/registry slug is held by a private record/);
    expect(() => insertRaw(db, 'org_a', 'mine')).toThrow(/UNIQUE/);
    expect(() => insertRaw(db, null, 'shared')).toThrow(/UNIQUE/);
    // The same private slug in two organizations is two unrelated records.
    insertRaw(db, 'org_b', 'mine');
    expect(() => db.prepare("UPDATE services SET org_id = NULL WHERE org_id = 'org_b' AND slug = 'mine'").run()).toThrow(/keeps its slug and organization/);
    expect(() => db.prepare("UPDATE services SET org_id = 'org_b' WHERE org_id IS NULL").run()).toThrow(/keeps its slug and organization/);
    expect(() => db.prepare("UPDATE services SET slug = 'other' WHERE org_id = 'org_a'").run()).toThrow(/keeps its slug and organization/);
    expect(() => insertRaw(db, 'org_nope', 'x')).toThrow(/FOREIGN KEY/);
    db.close();
  });
});

describe('createServiceStore', () => {
  test('behavior: visibleSummaries is the shared records then the organization\'s own, each by slug; never another organization\'s', () => {
    const db = withOrgs(openDatabase(tempDb()), 'org_a', 'org_b');
    const services = createServiceStore(db);
    writeTxn(db, () => {
      services.upsert(record('zeta'), null, 1);
      services.upsert(record('alpha'), null, 1);
      services.upsert(record('b-only'), 'org_b', 1);
      services.upsert(record('a2'), 'org_a', 1);
      services.upsert(record('a1'), 'org_a', 1);
    });
    expect(services.visibleSummaries('org_a').map((s) => [s.slug, s.orgId])).toEqual([['alpha', null], ['zeta', null], ['a1', 'org_a'], ['a2', 'org_a']]);
    expect(services.visibleSummaries('org_b').map((s) => s.slug)).toEqual(['alpha', 'zeta', 'b-only']);
    expect(services.get('b-only', 'org_a')).toBeUndefined();
    expect(services.get('b-only', null)).toBeUndefined();
    db.close();
  });

  test('behavior: an upsert keeps the id and scope, and every write is seen by the next visibleSummaries (cache dropped)', () => {
    const db = withOrgs(openDatabase(tempDb()), 'org_a');
    const services = createServiceStore(db);
    const first = writeTxn(db, () => services.upsert(record('mine', 'https://one.example/'), 'org_a', 1));
    expect(services.visibleSummaries('org_a').map((s) => s.paymentMethods[0]!.baseUrl)).toEqual(['https://one.example/']);
    const second = writeTxn(db, () => services.upsert(record('mine', 'https://two.example/'), 'org_a', 2));
    expect([second.id, second.orgId]).toEqual([first.id, 'org_a']);
    expect(services.visibleSummaries('org_a').map((s) => s.paymentMethods[0]!.baseUrl)).toEqual(['https://two.example/']);
    expect(writeTxn(db, () => services.delete('mine', null))).toBe(false);
    expect(writeTxn(db, () => services.delete('mine', 'org_a'))).toBe(true);
    expect(services.visibleSummaries('org_a')).toEqual([]);
    db.close();
  });
});
