import type { Migration } from './migration.js';

/**
 * Each record's number of endpoints in `endpoint_count`, written by the store with the record, so
 * the registry's summaries (what listings show and attribution reads, store/services.ts) are
 * rebuilt after a change without parsing any record's endpoints; and the table rebuilt with its
 * two large columns (`description`, `endpoints`: up to 64 KiB a record) last. SQLite stores a
 * record's columns in order and a long value's tail in a chain of overflow pages, so reading a
 * column stored after `endpoints` (as `base_urls` was, added by 0013) walks that chain: summing an
 * organization's base URLs for its bounds, or reading its summaries, read every page of its
 * records. Before them, those columns are on the row's own page; the values' lengths (their
 * stored bytes, octet_length) are in the row's header either way. The indexes and triggers are
 * 0003's.
 *
 * PostgreSQL: the same column; the table is not rebuilt, since PostgreSQL keeps long values out of
 * line (TOAST), so no column's place makes reading another one cost more. Never edit once landed:
 * add the next migration.
 */

const sqlite = `
CREATE TABLE services_ordered (
  id              TEXT PRIMARY KEY,
  org_id          TEXT REFERENCES organizations(id),
  slug            TEXT NOT NULL,
  name            TEXT NOT NULL,
  category        TEXT NOT NULL,
  logo_url        TEXT NOT NULL,
  docs_url        TEXT NOT NULL,
  base_urls       INTEGER NOT NULL DEFAULT 0,
  endpoint_count  INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  payment_methods TEXT NOT NULL,
  description     TEXT NOT NULL,
  endpoints       TEXT NOT NULL
) STRICT;
INSERT INTO services_ordered (id, org_id, slug, name, category, logo_url, docs_url, base_urls, endpoint_count, created_at, updated_at, payment_methods, description, endpoints)
  SELECT id, org_id, slug, name, category, logo_url, docs_url, base_urls, json_array_length(endpoints), created_at, updated_at, payment_methods, description, endpoints
  FROM services;
DROP TABLE services;
ALTER TABLE services_ordered RENAME TO services;
CREATE UNIQUE INDEX services_shared_slug ON services (slug) WHERE org_id IS NULL;
CREATE UNIQUE INDEX services_private_slug ON services (org_id, slug) WHERE org_id IS NOT NULL;

CREATE TRIGGER services_private_not_shared BEFORE INSERT ON services
  WHEN NEW.org_id IS NOT NULL AND EXISTS (SELECT 1 FROM services WHERE org_id IS NULL AND slug = NEW.slug)
  BEGIN SELECT RAISE(ABORT, 'registry slug is shared'); END;
CREATE TRIGGER services_shared_not_private BEFORE INSERT ON services
  WHEN NEW.org_id IS NULL AND EXISTS (SELECT 1 FROM services WHERE org_id IS NOT NULL AND slug = NEW.slug)
  BEGIN SELECT RAISE(ABORT, 'registry slug is held by a private record'); END;
CREATE TRIGGER services_scope_fixed BEFORE UPDATE OF slug, org_id ON services
  WHEN NEW.slug IS NOT OLD.slug OR NEW.org_id IS NOT OLD.org_id
  BEGIN SELECT RAISE(ABORT, 'a registry record keeps its slug and organization'); END;
`;

const postgres = `
ALTER TABLE services ADD COLUMN endpoint_count BIGINT NOT NULL DEFAULT 0;
UPDATE services SET endpoint_count = json_array_length(endpoints::json);
`;

export const migration: Migration = { version: 14, name: 'registry_endpoint_counts', sqlite, postgres };
