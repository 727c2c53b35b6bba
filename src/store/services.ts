import type { Db } from './db.js';
import { indexRegistry, joinRegistryIndexes, type RegistryIndex } from '../domain/indexRegistry.js';
import type { RegisteredService, ServiceRecord, ServiceSummary } from '../domain/types.js';
import { ScopeCache, SHARED_SCOPE } from './registryCache.js';
import type { RegistryUsage, ServiceRepository } from './port.js';
import type { Synchronous } from './syncTables.js';

type ServiceRow = {
  id: string; org_id: string | null; slug: string; name: string; description: string; category: string; logo_url: string;
  docs_url: string; payment_methods: string; endpoints: string;
};

function toService(r: ServiceRow): RegisteredService {
  return {
    id: r.id, orgId: r.org_id, slug: r.slug, name: r.name, description: r.description, category: r.category,
    logoUrl: r.logo_url, docsUrl: r.docs_url,
    paymentMethods: JSON.parse(r.payment_methods) as ServiceRecord['paymentMethods'],
    endpoints: JSON.parse(r.endpoints) as ServiceRecord['endpoints'],
  };
}

const COLUMNS = 'id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints';

/**
 * A record's stored size (domain/recordBytes.ts) in SQL, the same on both stores, over the columns
 * of table alias `t` ('' or 's.'): octet_length reads a value's length from the row (SQLite's
 * record header, PostgreSQL's varlena or TOAST header), not the value, so summing it over an
 * organization's records costs no parsing.
 */
export const recordBytesSql = (t = '') => ['slug', 'name', 'description', 'category', 'logo_url', 'docs_url', 'payment_methods', 'endpoints']
  .map((c) => `octet_length(${t}${c})`).join(' + ');

/** A summary row: everything but descriptions and endpoints, which are counted (migration 0014) and sized by SQL instead of parsed here. */
export type SummaryRow = {
  org_id: string | null; slug: string; name: string; category: string; docs_url: string; payment_methods: string;
  endpoint_count: number | bigint; bytes: number | bigint;
};

/** Summary columns of table alias `t` ('' or 's.'). */
export const summaryColumns = (t: string) =>
  `${t}org_id, ${t}slug, ${t}name, ${t}category, ${t}docs_url, ${t}payment_methods, ${t}endpoint_count, (${recordBytesSql(t)}) AS bytes`;

function toSummary(r: SummaryRow): ServiceSummary {
  return {
    orgId: r.org_id, slug: r.slug, name: r.name, category: r.category, docsUrl: r.docs_url,
    paymentMethods: JSON.parse(r.payment_methods) as ServiceRecord['paymentMethods'],
    endpointCount: Number(r.endpoint_count), bytes: Number(r.bytes),
  };
}

/** What a summary row keeps in memory, roughly: its strings, and a little for the objects around them. */
function rowWeight(r: SummaryRow): number {
  return 64 + r.slug.length + r.name.length + r.category.length + r.docs_url.length + r.payment_methods.length;
}

/** One scope's summaries (the shared ones, or one organization's own), by slug, their index and what they weigh. */
export type RegistryScopeCache = { list: ServiceSummary[]; index: RegistryIndex; weight: number };

/**
 * The registry cache the writer connection's store and the reader's share (store.ts). A scope's
 * entry may be filled while the writer has a transaction open, as long as that transaction has
 * not changed the scope (`dirty`): its committed rows are then what every connection reads. Only
 * a reader inside a transaction of its own (an older snapshot) never fills it.
 */
export type RegistryCache = {
  scopes: ScopeCache<RegistryScopeCache>;
  /** Scopes changed since the writer last had no transaction open. */
  dirty: Set<string>;
  /** Whether the writer connection has a transaction open. */
  writing: () => boolean;
  /** Whether this connection reads inside a transaction of its own (the reader's snapshot). */
  inSnapshot: () => boolean;
};

const USAGE_SQL = `SELECT count(*) AS records, coalesce(sum(base_urls), 0) AS base_urls, coalesce(sum(${recordBytesSql()}), 0) AS bytes
  FROM services WHERE org_id = ?`;

/** A record's base URLs (payment methods with one), kept in its row for the bounds (migration 0013). */
export function countBaseUrls(s: ServiceRecord): number {
  return s.paymentMethods.filter((m) => Boolean(m.baseUrl)).length;
}

/** Builds one scope's cache entry from its summary rows, in slug order. */
export function registryScope(rows: readonly SummaryRow[]): RegistryScopeCache {
  const list = rows.map(toSummary);
  return { list, index: indexRegistry(list), weight: rows.reduce((sum, r) => sum + rowWeight(r), 0) };
}

/**
 * The service registry. A record is shared (`orgId` null, the operator's) or private to one
 * organization. A slug names at most one record in what an organization sees (the schema's
 * triggers refuse a slug that is both shared and private), so `visibleSummaries` is a plain union:
 * shared records first, then the organization's own, each by slug. Quote and sign attribute every
 * probed URL against that, through its index (domain/indexRegistry.ts), so each scope's summaries
 * (no free text, no endpoints: counted and sized by SQL, never parsed here) are cached with their
 * index, least recently used organizations out past a byte budget (registryCache.ts). Every write
 * goes through this module and drops the cache of the scope it changes, and only that one: one
 * organization's registry changes never make another's attribution rebuild anything but the
 * shared index, and a rebuild reads the summaries, not the records.
 */
export function createServiceStore(db: Db, shared?: RegistryCache): Synchronous<ServiceRepository> {
  // Shared with the reader connection's instance (store.ts): key '' holds the shared records, an
  // organization's id its own.
  const cache: RegistryCache = shared ?? { scopes: new ScopeCache(), dirty: new Set(), writing: () => db.inTransaction, inSnapshot: () => false };
  const { scopes, dirty } = cache;
  const insert = db.prepare(`INSERT INTO services (${COLUMNS}, base_urls, endpoint_count, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const update = db.prepare(`UPDATE services SET name = ?, description = ?, category = ?, logo_url = ?, docs_url = ?,
    payment_methods = ?, endpoints = ?, base_urls = ?, endpoint_count = ?, updated_at = ? WHERE id = ?`);
  const sharedBySlug = db.prepare(`SELECT ${COLUMNS} FROM services WHERE org_id IS NULL AND slug = ?`);
  const privateBySlug = db.prepare(`SELECT ${COLUMNS} FROM services WHERE org_id = ? AND slug = ?`);
  const sharedRange = db.prepare(`SELECT ${COLUMNS} FROM services WHERE org_id IS NULL AND slug >= ? AND slug <= ? ORDER BY slug`);
  const privateRange = db.prepare(`SELECT ${COLUMNS} FROM services WHERE org_id = ? AND slug >= ? AND slug <= ? ORDER BY slug`);
  const allShared = db.prepare(`SELECT ${summaryColumns('')} FROM services WHERE org_id IS NULL ORDER BY slug`);
  const allPrivate = db.prepare(`SELECT ${summaryColumns('')} FROM services WHERE org_id = ? ORDER BY slug`);
  const holders = db.prepare('SELECT org_id FROM services WHERE org_id IS NOT NULL AND slug = ? ORDER BY org_id');
  const removeShared = db.prepare('DELETE FROM services WHERE org_id IS NULL AND slug = ?');
  const removePrivate = db.prepare('DELETE FROM services WHERE org_id = ? AND slug = ?');
  const usage = db.prepare(USAGE_SQL);
  const visibleBytes = db.prepare(`SELECT coalesce(sum(${recordBytesSql()}), 0) AS bytes FROM services
    WHERE (org_id IS NULL OR org_id = ?) AND slug IN (SELECT value FROM json_each(?))`).pluck();

  const dropCache = (orgId: string | null) => {
    dirty.add(orgId ?? SHARED_SCOPE);
    scopes.delete(orgId ?? SHARED_SCOPE);
  };
  // Only committed state is cached: rows a transaction changed may still be rolled back. A scope
  // the open write left alone reads as committed, so a deciding write (or a probe meanwhile) fills
  // it, and a change's rebuild happens once, not in every write until the queue is idle.
  const cacheable = (key: string): boolean => {
    if (cache.inSnapshot()) return false;
    if (!cache.writing()) {
      dirty.clear();
      return true;
    }
    return !dirty.has(key);
  };
  const read = (orgId: string | null, slug: string) =>
    (orgId === null ? sharedBySlug.get(slug) : privateBySlug.get(orgId, slug)) as ServiceRow | undefined;
  const scope = (orgId: string | null): RegistryScopeCache => {
    const key = orgId ?? SHARED_SCOPE;
    const hit = scopes.get(key);
    if (hit) return hit;
    const entry = registryScope((orgId === null ? allShared.all() : allPrivate.all(orgId)) as SummaryRow[]);
    if (cacheable(key)) scopes.set(key, entry);
    return entry;
  };

  return {
    /** Inserts or replaces by slug within one scope (`orgId` null: shared); an existing record keeps its id. */
    upsert(s: ServiceRecord, orgId: string | null, now: number): RegisteredService {
      dropCache(orgId);
      const methods = JSON.stringify(s.paymentMethods);
      const endpoints = JSON.stringify(s.endpoints);
      const existing = read(orgId, s.slug);
      const baseUrls = countBaseUrls(s);
      if (existing) {
        update.run(s.name, s.description, s.category, s.logoUrl, s.docsUrl, methods, endpoints, baseUrls, s.endpoints.length, now, existing.id);
      } else {
        insert.run(s.id, orgId, s.slug, s.name, s.description, s.category, s.logoUrl, s.docsUrl, methods, endpoints, baseUrls, s.endpoints.length, now, now);
      }
      return toService(read(orgId, s.slug)!);
    },
    /** The record with this slug in exactly one scope (`orgId` null: shared). */
    get(slug: string, orgId: string | null): RegisteredService | undefined {
      const r = read(orgId, slug);
      return r && toService(r);
    },
    /** The whole records of exactly one scope (`orgId` null: shared) with slugs from `first` to `last`, by slug: a page of `summaries`. */
    range(orgId: string | null, first: string, last: string): RegisteredService[] {
      return ((orgId === null ? sharedRange.all(first, last) : privateRange.all(orgId, first, last)) as ServiceRow[]).map(toService);
    },
    /** The summaries of exactly one scope (`orgId` null: shared), by slug. */
    summaries(orgId: string | null): readonly ServiceSummary[] {
      return scope(orgId).list;
    },
    /** What one organization's agents see: every shared record, then the organization's own, each by slug. */
    visibleSummaries(orgId: string): readonly ServiceSummary[] {
      return [...scope(null).list, ...scope(orgId).list];
    },
    /** The index of what `visibleSummaries` lists, for attribution. */
    visibleIndex(orgId: string): RegistryIndex {
      return joinRegistryIndexes(scope(null).index, scope(orgId).index);
    },
    /** How many records, base URLs and stored bytes one organization holds privately, as this transaction sees it. */
    usage(orgId: string): RegistryUsage {
      const r = usage.get(orgId) as { records: number; base_urls: number; bytes: number };
      return { records: r.records, baseUrls: r.base_urls, bytes: r.bytes };
    },
    /** The stored bytes of the records these slugs name in what one organization sees, together, read without reading the records. */
    visibleBytes(orgId: string, slugs: readonly string[]): number {
      return visibleBytes.get(orgId, JSON.stringify(slugs)) as number;
    },
    /** Organizations holding a private record with this slug. */
    privateHolders(slug: string): string[] {
      return (holders.all(slug) as Array<{ org_id: string }>).map((r) => r.org_id);
    },
    /** Deletes the record with this slug in exactly one scope; false when there was none. */
    delete(slug: string, orgId: string | null): boolean {
      dropCache(orgId);
      return (orgId === null ? removeShared.run(slug) : removePrivate.run(orgId, slug)).changes > 0;
    },
  };
}
export type ServiceStore = ReturnType<typeof createServiceStore>;
