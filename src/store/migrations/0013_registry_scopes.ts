/**
 * What one organization's registry holds, countable without reading its records: each record's
 * number of base URLs (payment methods with a base URL) in `base_urls`, written by the store with
 * the record, so the bounds on an organization's private records (app/registry/registry.ts) are checked
 * inside the write queue by summing one integer per record, not by parsing every record's JSON.
 * PostgreSQL's twin (../pg/migrations/0013_registry_scopes.ts) also adds the per-scope versions its
 * replicas check their cached attribution index against; a SQLite database has one writer, this
 * process, whose store drops a scope's cached index on every change it makes (../services.ts).
 * Never edit once landed.
 */
export const sql = `
ALTER TABLE services ADD COLUMN base_urls INTEGER NOT NULL DEFAULT 0;
UPDATE services SET base_urls = (SELECT count(*) FROM json_each(payment_methods) WHERE json_extract(value, '$.baseUrl') <> '');
`;
