import type { Migration } from './migration.js';

/**
 * What one organization's registry holds, countable without reading its records: each record's
 * number of base URLs (payment methods with a base URL) in `base_urls`, written by the store with
 * the record, so the bounds on an organization's private records (app/registry/registry.ts) are checked
 * inside the write queue by summing one integer per record, not by parsing every record's JSON.
 * A SQLite database has one writer, this process, whose store drops a scope's cached index on
 * every change it makes (../services.ts); replicas on PostgreSQL need more (below).
 *
 * PostgreSQL: the same column, and a version per registry scope ('' for the shared records, an
 * organization's id for its own) in registry_versions, set by trigger on every change of
 * `services`. Each replica keeps each scope's attribution index in memory (../pg/services.ts);
 * another replica's change is seen by reading one row per scope, and only a scope whose version
 * moved is read again. Versions come from a sequence, which never hands out a value twice, even to
 * a transaction that rolls back: a version names one content for good, so an index built inside a
 * transaction that rolls back is never taken for committed state. A scope without a row is at
 * version 0. Never edit once landed: add the next migration.
 */

/** Tables only PostgreSQL has (migrate-store has nothing to copy into them). */
export const PG_ONLY_TABLES: readonly string[] = ['registry_versions'];

const sqlite = `
ALTER TABLE services ADD COLUMN base_urls INTEGER NOT NULL DEFAULT 0;
UPDATE services SET base_urls = (SELECT count(*) FROM json_each(payment_methods) WHERE json_extract(value, '$.baseUrl') <> '');
`;

const postgres = `
ALTER TABLE services ADD COLUMN base_urls BIGINT NOT NULL DEFAULT 0;
UPDATE services SET base_urls = (SELECT count(*) FROM json_array_elements(payment_methods::json) m WHERE m->>'baseUrl' <> '');

CREATE SEQUENCE registry_version_seq;
CREATE TABLE registry_versions (
  scope   TEXT COLLATE "C" PRIMARY KEY,
  version BIGINT NOT NULL
);

CREATE FUNCTION registry_version_bump() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  rec services%ROWTYPE;
BEGIN
  IF TG_OP = 'DELETE' THEN rec := OLD; ELSE rec := NEW; END IF;
  INSERT INTO registry_versions (scope, version) VALUES (coalesce(rec.org_id, ''), nextval('registry_version_seq'))
    ON CONFLICT (scope) DO UPDATE SET version = excluded.version;
  RETURN NULL;
END $fn$;
CREATE TRIGGER registry_version_bump AFTER INSERT OR UPDATE OR DELETE ON services FOR EACH ROW EXECUTE FUNCTION registry_version_bump();
`;

export const migration: Migration = { version: 13, name: 'registry_scopes', sqlite, postgres };
