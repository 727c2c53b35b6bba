import { joinRegistryIndexes } from '../../domain/indexRegistry.js';
import type { RegisteredService, ServiceRecord } from '../../domain/types.js';
import { ADDRESS } from '../../domain/validate.js';
import { ScopeCache, SHARED_SCOPE } from '../registryCache.js';
import { countBaseUrls, recordBytesSql, registryScope, summaryColumns, type RegistryScopeCache, type SummaryRow } from '../services.js';
import { num, statement, type Sql } from './sql.js';
import type { ServiceRepository } from '../port.js';

type ServiceRow = {
  id: string; org_id: string | null; slug: string; name: string; description: string; category: string; logo_url: string;
  docs_url: string; payment_methods: string; endpoints: string;
};

const COLUMNS = 'id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints';
const INSERT = statement('svc.insert', `INSERT INTO services (${COLUMNS}, base_urls, endpoint_count, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`);
const UPDATE = statement('svc.update', `UPDATE services SET name = $1, description = $2, category = $3, logo_url = $4, docs_url = $5,
  payment_methods = $6, endpoints = $7, base_urls = $8, endpoint_count = $9, updated_at = $10 WHERE id = $11`);
const SHARED_BY_SLUG = statement('svc.sharedBySlug', `SELECT ${COLUMNS} FROM services WHERE org_id IS NULL AND slug = $1`);
const PRIVATE_BY_SLUG = statement('svc.privateBySlug', `SELECT ${COLUMNS} FROM services WHERE org_id = $1 AND slug = $2`);
const SHARED_RANGE = statement('svc.sharedRange', `SELECT ${COLUMNS} FROM services WHERE org_id IS NULL AND slug >= $1 AND slug <= $2 ORDER BY slug`);
const PRIVATE_RANGE = statement('svc.privateRange', `SELECT ${COLUMNS} FROM services WHERE org_id = $1 AND slug >= $2 AND slug <= $3 ORDER BY slug`);
// Migration 0013: a scope's version and its summaries (endpoint counts: 0014), read by one statement so from one snapshot
// (a version is never paired with older records); a scope without records still has its row.
const versionOf = (scope: string) => `(SELECT coalesce((SELECT version FROM registry_versions WHERE scope = ${scope}), 0)::text AS version)`;
const SUMMARY = summaryColumns('s.');
const SHARED_SCOPE_ROWS = statement('svc.sharedScope', `SELECT v.version, ${SUMMARY}
  FROM ${versionOf("''")} v LEFT JOIN services s ON s.org_id IS NULL ORDER BY s.slug`);
const PRIVATE_SCOPE_ROWS = statement('svc.privateScope', `SELECT v.version, ${SUMMARY}
  FROM ${versionOf('$1')} v LEFT JOIN services s ON s.org_id = $1 ORDER BY s.slug`);
const VERSIONS = statement('svc.versions', `SELECT scope, version::text AS version FROM registry_versions WHERE scope IN ('', $1)`);
const USAGE = statement('svc.usage', `SELECT count(*)::int AS records, coalesce(sum(base_urls), 0)::int AS base_urls,
  coalesce(sum(${recordBytesSql()}), 0) AS bytes FROM services WHERE org_id = $1`);
const VISIBLE_BYTES = statement('svc.visibleBytes', `SELECT coalesce(sum(${recordBytesSql()}), 0) AS bytes FROM services
  WHERE (org_id IS NULL OR org_id = $1) AND slug = ANY($2::text[])`);
// A registry change can change which service a paywall URL is attributed to, and so whether an
// agent that allows services by slug may pay it. Deciding writes hold the agent's policy row
// (agents.ts BY_ID_FOR_USE), so a registry write first writes a new version of the policy row of
// every agent in its scope (all organizations' for a shared record) that allows a slug: a deciding
// write holding one holds the registry write back, or, having read before it, fails to serialize.
// Locked in agent order, so two registry writes cannot deadlock; once per transaction and scope.
// An entry that is not an address is a slug: the same pattern the policy engine tells them apart by.
const SLUG_ENTRY = `EXISTS (SELECT 1 FROM json_array_elements_text(p.allowlist::json) e WHERE e !~ '${ADDRESS.source}')`;
// A shared record's scope is every agent: the agents table is not read at all, so the write is in
// no read/write cycle with pings (which write agents rows); a private one reads the organization's.
const TOUCH_ALL_SLUG_POLICIES = statement('svc.touchAllSlugPolicies', `UPDATE policies SET updated_at = updated_at WHERE agent_id IN (
  SELECT p.agent_id FROM policies p WHERE ${SLUG_ENTRY} ORDER BY p.agent_id FOR UPDATE OF p)`);
const TOUCH_ORG_SLUG_POLICIES = statement('svc.touchOrgSlugPolicies', `UPDATE policies SET updated_at = updated_at WHERE agent_id IN (
  SELECT p.agent_id FROM policies p JOIN agents a ON a.id = p.agent_id WHERE a.org_id = $1 AND ${SLUG_ENTRY} ORDER BY p.agent_id FOR UPDATE OF p)`);
const HOLDERS = statement('svc.holders', 'SELECT org_id FROM services WHERE org_id IS NOT NULL AND slug = $1 ORDER BY org_id');
const REMOVE_SHARED = statement('svc.removeShared', 'DELETE FROM services WHERE org_id IS NULL AND slug = $1');
const REMOVE_PRIVATE = statement('svc.removePrivate', 'DELETE FROM services WHERE org_id = $1 AND slug = $2');

function toService(r: ServiceRow): RegisteredService {
  return {
    id: r.id, orgId: r.org_id, slug: r.slug, name: r.name, description: r.description, category: r.category,
    logoUrl: r.logo_url, docsUrl: r.docs_url,
    paymentMethods: JSON.parse(r.payment_methods) as ServiceRecord['paymentMethods'],
    endpoints: JSON.parse(r.endpoints) as ServiceRecord['endpoints'],
  };
}

/** Each scope's summaries and index with the version they were read at ('' is the shared scope), least recently used out past a byte budget. */
export type PgRegistryCache = ScopeCache<RegistryScopeCache & { version: string }>;

/**
 * The service registry (PostgreSQL twin of ../services.ts): shared records (`orgId` null) and
 * organization-private ones, a slug never both (migration 0003's trigger). Each scope's summaries
 * and attribution index are cached in process (`cache`, one per replica, shared by every binding
 * of it: store.ts): another replica may change the registry at any moment, so each use first
 * reads the scopes' versions (migration 0013, one row each) and reads again only a scope whose
 * version moved. Inside a transaction the versions are read in its snapshot, so a decision is
 * judged by the registry as its own write sees it.
 */
export function createPgServiceStore(sql: Sql, cache: PgRegistryCache = new ScopeCache()): ServiceRepository {
  const read = (orgId: string | null, slug: string) =>
    orgId === null ? sql.one<ServiceRow>(SHARED_BY_SLUG, [slug]) : sql.one<ServiceRow>(PRIVATE_BY_SLUG, [orgId, slug]);
  // This binding lives for one transaction (tables.ts): the scopes whose agents it already touched.
  const touched = new Set<string | null>();
  const scope = async (orgId: string | null, version: string): Promise<RegistryScopeCache> => {
    const key = orgId ?? SHARED_SCOPE;
    const hit = cache.get(key);
    if (hit && hit.version === version) return hit;
    const rows = orgId === null
      ? await sql.rows<Partial<SummaryRow> & { version: string }>(SHARED_SCOPE_ROWS)
      : await sql.rows<Partial<SummaryRow> & { version: string }>(PRIVATE_SCOPE_ROWS, [orgId]);
    const entry = { ...registryScope(rows.filter((r) => r.slug != null) as SummaryRow[]), version: rows[0]!.version };
    cache.set(key, entry);
    return entry;
  };
  const versions = async (orgId: string) => {
    const rows = await sql.rows<{ scope: string; version: string }>(VERSIONS, [orgId]);
    const at = (key: string) => rows.find((v) => v.scope === key)?.version ?? '0';
    return [await scope(null, at(SHARED_SCOPE)), await scope(orgId, at(orgId))] as const;
  };
  const touchScope = async (orgId: string | null) => {
    if (touched.has(null) || touched.has(orgId)) return;
    if (orgId === null) await sql.run(TOUCH_ALL_SLUG_POLICIES);
    else await sql.run(TOUCH_ORG_SLUG_POLICIES, [orgId]);
    touched.add(orgId);
  };
  return {
    async upsert(s, orgId, now) {
      await touchScope(orgId);
      const methods = JSON.stringify(s.paymentMethods);
      const endpoints = JSON.stringify(s.endpoints);
      const existing = await read(orgId, s.slug);
      const baseUrls = countBaseUrls(s);
      if (existing) {
        await sql.run(UPDATE, [s.name, s.description, s.category, s.logoUrl, s.docsUrl, methods, endpoints, baseUrls, s.endpoints.length, now, existing.id]);
      } else {
        await sql.run(INSERT, [s.id, orgId, s.slug, s.name, s.description, s.category, s.logoUrl, s.docsUrl, methods, endpoints, baseUrls, s.endpoints.length, now, now]);
      }
      return toService((await read(orgId, s.slug))!);
    },
    async get(slug, orgId) {
      const r = await read(orgId, slug);
      return r && toService(r);
    },
    async range(orgId, first, last) {
      const rows = orgId === null ? await sql.rows<ServiceRow>(SHARED_RANGE, [first, last]) : await sql.rows<ServiceRow>(PRIVATE_RANGE, [orgId, first, last]);
      return rows.map(toService);
    },
    async summaries(orgId) {
      const key = orgId ?? SHARED_SCOPE;
      const rows = await sql.rows<{ scope: string; version: string }>(VERSIONS, [key]);
      return (await scope(orgId, rows.find((v) => v.scope === key)?.version ?? '0')).list;
    },
    async visibleSummaries(orgId) {
      const [shared, own] = await versions(orgId);
      return [...shared.list, ...own.list];
    },
    async visibleIndex(orgId) {
      const [shared, own] = await versions(orgId);
      return joinRegistryIndexes(shared.index, own.index);
    },
    async usage(orgId) {
      const r = (await sql.one<{ records: number; base_urls: number; bytes: bigint | number }>(USAGE, [orgId]))!;
      return { records: r.records, baseUrls: r.base_urls, bytes: num(r.bytes) };
    },
    async visibleBytes(orgId, slugs) {
      return num((await sql.one<{ bytes: bigint | number }>(VISIBLE_BYTES, [orgId, slugs]))!.bytes);
    },
    async privateHolders(slug) {
      return (await sql.rows<{ org_id: string }>(HOLDERS, [slug])).map((r) => r.org_id);
    },
    async delete(slug, orgId) {
      await touchScope(orgId);
      return (orgId === null ? await sql.run(REMOVE_SHARED, [slug]) : await sql.run(REMOVE_PRIVATE, [orgId, slug])) > 0;
    },
  };
}
