import type { Db } from './db.js';
import type { RegisteredService, ServiceRecord } from '../domain/types.js';
import type { SharedCache } from './agents.js';

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
 * The service registry. A record is shared (`orgId` null, the operator's) or private to one
 * organization. A slug names at most one record in what an organization sees (the schema's
 * triggers refuse a slug that is both shared and private), so `visibleTo` is a plain union:
 * shared records first, then the organization's own, each by slug. Quote and sign attribute every
 * probed URL against that list, so it is cached per organization; every write goes through this
 * module and drops the cache.
 */
export function createServiceStore(db: Db, sharedCache?: SharedCache<RegisteredService[]>) {
  // Shared with the reader connection's instance (store.ts; agents.ts SharedCache): key '' holds
  // the shared records, an organization's id what it sees.
  const visible = sharedCache?.records ?? new Map<string, RegisteredService[]>();
  const SHARED = '';
  const insert = db.prepare(`INSERT INTO services (${COLUMNS}, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const update = db.prepare(`UPDATE services SET name = ?, description = ?, category = ?, logo_url = ?, docs_url = ?,
    payment_methods = ?, endpoints = ?, updated_at = ? WHERE id = ?`);
  const sharedBySlug = db.prepare(`SELECT ${COLUMNS} FROM services WHERE org_id IS NULL AND slug = ?`);
  const privateBySlug = db.prepare(`SELECT ${COLUMNS} FROM services WHERE org_id = ? AND slug = ?`);
  const allShared = db.prepare(`SELECT ${COLUMNS} FROM services WHERE org_id IS NULL ORDER BY slug`);
  const allPrivate = db.prepare(`SELECT ${COLUMNS} FROM services WHERE org_id = ? ORDER BY slug`);
  const holders = db.prepare('SELECT org_id FROM services WHERE org_id IS NOT NULL AND slug = ? ORDER BY org_id');
  const removeShared = db.prepare('DELETE FROM services WHERE org_id IS NULL AND slug = ?');
  const removePrivate = db.prepare('DELETE FROM services WHERE org_id = ? AND slug = ?');

  const dropCache = () => visible.clear();
  // Inside a transaction the rows may still be rolled back: only committed state is cached.
  const cacheable = sharedCache?.cacheable ?? (() => !db.inTransaction);
  const read = (orgId: string | null, slug: string) =>
    (orgId === null ? sharedBySlug.get(slug) : privateBySlug.get(orgId, slug)) as ServiceRow | undefined;
  const listShared = (): RegisteredService[] => {
    const hit = visible.get(SHARED);
    if (hit) return hit;
    const list = (allShared.all() as ServiceRow[]).map(toService);
    if (cacheable()) visible.set(SHARED, list);
    return list;
  };
  const visibleTo = (orgId: string): readonly RegisteredService[] => {
    const hit = visible.get(orgId);
    if (hit) return hit;
    const list = [...listShared(), ...(allPrivate.all(orgId) as ServiceRow[]).map(toService)];
    if (cacheable()) visible.set(orgId, list);
    return list;
  };

  return {
    /** Inserts or replaces by slug within one scope (`orgId` null: shared); an existing record keeps its id. */
    upsert(s: ServiceRecord, orgId: string | null, now: number): RegisteredService {
      dropCache();
      const methods = JSON.stringify(s.paymentMethods);
      const endpoints = JSON.stringify(s.endpoints);
      const existing = read(orgId, s.slug);
      if (existing) {
        update.run(s.name, s.description, s.category, s.logoUrl, s.docsUrl, methods, endpoints, now, existing.id);
      } else {
        insert.run(s.id, orgId, s.slug, s.name, s.description, s.category, s.logoUrl, s.docsUrl, methods, endpoints, now, now);
      }
      return toService(read(orgId, s.slug)!);
    },
    /** The record with this slug in exactly one scope (`orgId` null: shared). */
    get(slug: string, orgId: string | null): RegisteredService | undefined {
      const r = read(orgId, slug);
      return r && toService(r);
    },
    /** The records of exactly one scope (`orgId` null: shared), by slug. */
    list(orgId: string | null): readonly RegisteredService[] {
      return orgId === null ? listShared() : (allPrivate.all(orgId) as ServiceRow[]).map(toService);
    },
    /** What one organization's agents see: every shared record, then the organization's own, each by slug. */
    visibleTo,
    /** Organizations holding a private record with this slug. */
    privateHolders(slug: string): string[] {
      return (holders.all(slug) as Array<{ org_id: string }>).map((r) => r.org_id);
    },
    /** Deletes the record with this slug in exactly one scope; false when there was none. */
    delete(slug: string, orgId: string | null): boolean {
      dropCache();
      return (orgId === null ? removeShared.run(slug) : removePrivate.run(orgId, slug)).changes > 0;
    },
  };
}
export type ServiceStore = ReturnType<typeof createServiceStore>;
