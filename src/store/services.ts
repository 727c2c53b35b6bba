import type { Db } from './db.js';
import type { ServiceRecord } from '../domain/types.js';

type ServiceRow = {
  id: string; slug: string; name: string; description: string; category: string; logo_url: string;
  docs_url: string; payment_methods: string; endpoints: string;
};

function toService(r: ServiceRow): ServiceRecord {
  return {
    id: r.id, slug: r.slug, name: r.name, description: r.description, category: r.category,
    logoUrl: r.logo_url, docsUrl: r.docs_url,
    paymentMethods: JSON.parse(r.payment_methods) as ServiceRecord['paymentMethods'],
    endpoints: JSON.parse(r.endpoints) as ServiceRecord['endpoints'],
  };
}

const COLUMNS = 'id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints';

/**
 * The service registry, keyed by slug. Quote and sign attribute every probed URL against the
 * whole registry, so the list is cached; every write goes through this module and drops it.
 */
export function createServiceStore(db: Db) {
  let cached: ServiceRecord[] | undefined;
  const upsert = db.prepare(`INSERT INTO services (${COLUMNS}, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (slug) DO UPDATE SET name = excluded.name, description = excluded.description,
    category = excluded.category, logo_url = excluded.logo_url, docs_url = excluded.docs_url,
    payment_methods = excluded.payment_methods, endpoints = excluded.endpoints, updated_at = excluded.updated_at`);
  const bySlug = db.prepare(`SELECT ${COLUMNS} FROM services WHERE slug = ?`);
  const all = db.prepare(`SELECT ${COLUMNS} FROM services ORDER BY slug`);
  const remove = db.prepare('DELETE FROM services WHERE slug = ?');
  return {
    /** Inserts or replaces by slug; an existing record keeps its id. */
    upsert(s: ServiceRecord, now: number): ServiceRecord {
      cached = undefined;
      upsert.run(s.id, s.slug, s.name, s.description, s.category, s.logoUrl, s.docsUrl,
        JSON.stringify(s.paymentMethods), JSON.stringify(s.endpoints), now, now);
      return toService(bySlug.get(s.slug) as ServiceRow);
    },
    get(slug: string): ServiceRecord | undefined {
      const r = bySlug.get(slug) as ServiceRow | undefined;
      return r && toService(r);
    },
    list(): readonly ServiceRecord[] {
      if (cached) return cached;
      const list = (all.all() as ServiceRow[]).map(toService);
      // Inside a transaction the rows may still be rolled back: only committed state is cached.
      if (!db.inTransaction) cached = list;
      return list;
    },
    delete(slug: string): boolean {
      cached = undefined;
      return remove.run(slug).changes > 0;
    },
  };
}
export type ServiceStore = ReturnType<typeof createServiceStore>;
