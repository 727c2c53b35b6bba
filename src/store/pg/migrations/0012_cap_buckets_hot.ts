/**
 * Numbered like SQLite's 0012, which keeps the current hours' cap buckets in a small table of
 * their own so that a group commit's bucket updates share a few pages of its single-writer WAL.
 * PostgreSQL keeps one cap_buckets: its bucket rows are updated in place on heap pages filled in
 * the order the agent-hours began, not rewritten in key order. Nothing changes here, so the two
 * stores' versions stay equal (migrate-store requires it). Never edit once landed.
 */
export const sql = `SELECT 1;`;
