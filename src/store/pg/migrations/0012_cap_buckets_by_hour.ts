/**
 * Numbered like SQLite's 0012, which re-keys its cap_buckets hour first so that one group commit's
 * bucket updates share a few pages of its single-writer WAL. PostgreSQL keeps (agent_id, bucket):
 * its bucket rows are updated in place on heap pages, not rewritten by key order, and the sum reads
 * one agent's range. Nothing changes here, so the two stores' versions stay equal (migrate-store
 * requires it). Never edit once landed.
 */
export const sql = `SELECT 1;`;
