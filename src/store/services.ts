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

/** The service registry, keyed by slug. */
export function createServiceStore(db: Db) {
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
      upsert.run(s.id, s.slug, s.name, s.description, s.category, s.logoUrl, s.docsUrl,
        JSON.stringify(s.paymentMethods), JSON.stringify(s.endpoints), now, now);
      return toService(bySlug.get(s.slug) as ServiceRow);
    },
    get(slug: string): ServiceRecord | undefined {
      const r = bySlug.get(slug) as ServiceRow | undefined;
      return r && toService(r);
    },
    list(): ServiceRecord[] {
      return (all.all() as ServiceRow[]).map(toService);
    },
    delete(slug: string): boolean {
      return remove.run(slug).changes > 0;
    },
  };
}
export type ServiceStore = ReturnType<typeof createServiceStore>;
