import type { Migration } from './migration.js';

/**
 * Organization-private registry records. `org_id` NULL is a shared record (the operator's); a
 * non-NULL `org_id` is a record only that organization sees. A slug names at most one record in
 * what any one organization sees: shared slugs are unique, private slugs are unique per
 * organization, and no slug is both shared and private anywhere (the triggers refuse it in either
 * order, so no later write can make one organization's lookup depend on another's records). A
 * record never changes slug or scope. Existing records become shared.
 *
 * PostgreSQL: the table is rebuilt the same way (copy, drop, rename), so both stores take the same
 * steps. Trigger WHEN clauses cannot hold subqueries there, so the EXISTS checks are inside
 * trigger functions. Between replicas the EXISTS check is race-free because every write runs
 * SERIALIZABLE (port.ts): two inserts that each miss the other's row form a cycle and one aborts.
 * Never edit once landed: add the next migration.
 */

const sqlite = `
CREATE TABLE services_scoped (
  id              TEXT PRIMARY KEY,
  org_id          TEXT REFERENCES organizations(id),
  slug            TEXT NOT NULL,
  name            TEXT NOT NULL,
  description     TEXT NOT NULL,
  category        TEXT NOT NULL,
  logo_url        TEXT NOT NULL,
  docs_url        TEXT NOT NULL,
  payment_methods TEXT NOT NULL,
  endpoints       TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
) STRICT;
INSERT INTO services_scoped (id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, created_at, updated_at)
  SELECT id, NULL, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, created_at, updated_at FROM services;
DROP TABLE services;
ALTER TABLE services_scoped RENAME TO services;
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
CREATE TABLE services_scoped (
  id              TEXT COLLATE "C" PRIMARY KEY,
  org_id          TEXT COLLATE "C" REFERENCES organizations(id),
  slug            TEXT COLLATE "C" NOT NULL,
  name            TEXT COLLATE "C" NOT NULL,
  description     TEXT COLLATE "C" NOT NULL,
  category        TEXT COLLATE "C" NOT NULL,
  logo_url        TEXT COLLATE "C" NOT NULL,
  docs_url        TEXT COLLATE "C" NOT NULL,
  payment_methods TEXT COLLATE "C" NOT NULL,
  endpoints       TEXT COLLATE "C" NOT NULL,
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL
);
INSERT INTO services_scoped (id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, created_at, updated_at)
  SELECT id, NULL, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, created_at, updated_at FROM services;
DROP TABLE services;
ALTER TABLE services_scoped RENAME TO services;
ALTER INDEX services_scoped_pkey RENAME TO services_pkey;
CREATE UNIQUE INDEX services_shared_slug ON services (slug) WHERE org_id IS NULL;
CREATE UNIQUE INDEX services_private_slug ON services (org_id, slug) WHERE org_id IS NOT NULL;

CREATE FUNCTION services_scope_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF NEW.org_id IS NOT NULL AND EXISTS (SELECT 1 FROM services WHERE org_id IS NULL AND slug = NEW.slug) THEN
    RAISE EXCEPTION 'registry slug is shared' USING ERRCODE = 'unique_violation';
  END IF;
  IF NEW.org_id IS NULL AND EXISTS (SELECT 1 FROM services WHERE org_id IS NOT NULL AND slug = NEW.slug) THEN
    RAISE EXCEPTION 'registry slug is held by a private record' USING ERRCODE = 'unique_violation';
  END IF;
  RETURN NEW;
END $fn$;
CREATE TRIGGER services_scope_insert BEFORE INSERT ON services FOR EACH ROW EXECUTE FUNCTION services_scope_insert();

CREATE FUNCTION services_scope_fixed() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  RAISE EXCEPTION 'a registry record keeps its slug and organization' USING ERRCODE = 'check_violation';
END $fn$;
CREATE TRIGGER services_scope_fixed BEFORE UPDATE OF slug, org_id ON services FOR EACH ROW
  WHEN (NEW.slug IS DISTINCT FROM OLD.slug OR NEW.org_id IS DISTINCT FROM OLD.org_id)
  EXECUTE FUNCTION services_scope_fixed();
`;

export const migration: Migration = { version: 3, name: 'private_services', sqlite, postgres };
