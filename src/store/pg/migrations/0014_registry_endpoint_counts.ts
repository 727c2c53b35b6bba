/**
 * PostgreSQL twin of ../../migrations/0014_registry_endpoint_counts.ts: each record's number of
 * endpoints, written by the store with the record, so a scope's summaries are read without parsing
 * any record's endpoints. The table is not rebuilt as SQLite's is: PostgreSQL keeps long values
 * out of line (TOAST), so no column's place makes reading another one cost more. Never edit once
 * landed.
 */
export const sql = `
ALTER TABLE services ADD COLUMN endpoint_count BIGINT NOT NULL DEFAULT 0;
UPDATE services SET endpoint_count = json_array_length(endpoints::json);
`;
