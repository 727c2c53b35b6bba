import type { RegisteredService, ServiceRecord } from '../../domain/types.js';
import type { ServiceStore } from '../services.js';
import type { AsyncTable } from './asyncTable.js';
import { statement, type Sql } from './sql.js';

type ServiceRow = {
  id: string; org_id: string | null; slug: string; name: string; description: string; category: string; logo_url: string;
  docs_url: string; payment_methods: string; endpoints: string;
};

const COLUMNS = 'id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints';
const INSERT = statement('svc.insert', `INSERT INTO services (${COLUMNS}, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`);
const UPDATE = statement('svc.update', `UPDATE services SET name = $1, description = $2, category = $3, logo_url = $4, docs_url = $5,
  payment_methods = $6, endpoints = $7, updated_at = $8 WHERE id = $9`);
const SHARED_BY_SLUG = statement('svc.sharedBySlug', `SELECT ${COLUMNS} FROM services WHERE org_id IS NULL AND slug = $1`);
const PRIVATE_BY_SLUG = statement('svc.privateBySlug', `SELECT ${COLUMNS} FROM services WHERE org_id = $1 AND slug = $2`);
const ALL_SHARED = statement('svc.allShared', `SELECT ${COLUMNS} FROM services WHERE org_id IS NULL ORDER BY slug`);
const ALL_PRIVATE = statement('svc.allPrivate', `SELECT ${COLUMNS} FROM services WHERE org_id = $1 ORDER BY slug`);
// Both scopes in visibleTo's order (shared first, each by slug), every row locked FOR SHARE: an
// update or delete of a record the deciding write attributed by waits for it, or, committed since
// its snapshot, makes this read a serialization failure (retried on a fresh snapshot).
const VISIBLE_FOR_USE = statement('svc.visibleForUse', `SELECT ${COLUMNS} FROM services WHERE org_id IS NULL OR org_id = $1
  ORDER BY org_id IS NOT NULL, slug FOR SHARE`);
// A new record can take a URL over from the one a deciding write attributed it to (the first
// match wins), and the rows that write holds cannot hold back a row that does not exist yet. So
// an insert first writes a new version of every row the new one could compete with (all of them
// for a shared record; the shared ones and the organization's own for a private one): a deciding
// write holding any of them holds the insert back, or, having read before it, fails to serialize.
const TOUCH_SCOPE = statement('svc.touchScope', 'UPDATE services SET updated_at = updated_at WHERE $1::text IS NULL OR org_id IS NULL OR org_id = $1');
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

/**
 * The service registry (PostgreSQL twin of ../services.ts): shared records (`orgId` null) and
 * organization-private ones, a slug never both (migration 0003's trigger). Not cached in process:
 * another replica may change the registry, and nothing tells this one yet.
 */
export function createPgServiceStore(sql: Sql): AsyncTable<ServiceStore> {
  const read = (orgId: string | null, slug: string) =>
    orgId === null ? sql.one<ServiceRow>(SHARED_BY_SLUG, [slug]) : sql.one<ServiceRow>(PRIVATE_BY_SLUG, [orgId, slug]);
  const listShared = async () => (await sql.rows<ServiceRow>(ALL_SHARED)).map(toService);
  const listPrivate = async (orgId: string) => (await sql.rows<ServiceRow>(ALL_PRIVATE, [orgId])).map(toService);
  return {
    async upsert(s, orgId, now) {
      const methods = JSON.stringify(s.paymentMethods);
      const endpoints = JSON.stringify(s.endpoints);
      const existing = await read(orgId, s.slug);
      if (existing) {
        await sql.run(UPDATE, [s.name, s.description, s.category, s.logoUrl, s.docsUrl, methods, endpoints, now, existing.id]);
      } else {
        await sql.run(TOUCH_SCOPE, [orgId]);
        await sql.run(INSERT, [s.id, orgId, s.slug, s.name, s.description, s.category, s.logoUrl, s.docsUrl, methods, endpoints, now, now]);
      }
      return toService((await read(orgId, s.slug))!);
    },
    async get(slug, orgId) {
      const r = await read(orgId, slug);
      return r && toService(r);
    },
    async list(orgId) {
      return orgId === null ? listShared() : listPrivate(orgId);
    },
    async visibleTo(orgId) {
      return [...(await listShared()), ...(await listPrivate(orgId))];
    },
    async visibleToForUse(orgId) {
      return (await sql.rows<ServiceRow>(VISIBLE_FOR_USE, [orgId])).map(toService);
    },
    async privateHolders(slug) {
      return (await sql.rows<{ org_id: string }>(HOLDERS, [slug])).map((r) => r.org_id);
    },
    async delete(slug, orgId) {
      return (orgId === null ? await sql.run(REMOVE_SHARED, [slug]) : await sql.run(REMOVE_PRIVATE, [orgId, slug])) > 0;
    },
  };
}
