/**
 * Numbered like SQLite's 0011 (cap_rows), which moves the cap sum's partial-hour rows out of a
 * per-agent index written on every payment. PostgreSQL keeps transactions_cap: its commits are
 * not bound by SQLite's one-writer WAL frames, and a replica's reads must see the other replicas'
 * rows at once, which a horizon kept by one process would not. Nothing changes here, so the two
 * stores' versions stay equal (migrate-store requires it). Never edit once landed.
 */
export const sql = `SELECT 1;`;
