import { capBucketOf } from './0010_cap_buckets.js';
import { SQLITE_ONLY_TABLES as CAP_ROWS_TABLES } from './0011_cap_rows.js';
import type { Migration } from './migration.js';

/**
 * The current hours' cap buckets in a table of their own (SQLite only). cap_buckets
 * (0010) is keyed (agent_id, bucket): once a ledger holds more than a day, each agent's bucket for
 * the current hour sits among its other hours, on a page of its own, so a group commit of n
 * payments would write about n bucket pages to the WAL, and the checkpoint would write them
 * again. Measured on the schema alone (groups of 11 payments over 256 agents): 26.8 WAL frames per
 * group with 30 days of buckets against 18.9 with one hour. Keying the table hour first would put those rows
 * together, but the cap sum would then read an agent's 24 hours by 24 key lookups: 12.7 µs per
 * sum against 4.5, which costs the quote more than the pages save.
 *
 * So the buckets are split at an hour, cap_hot_from.bucket: an agent-hour with bucket >= it is in
 * cap_buckets_hot, one below it in cap_buckets, never in both. The triggers of 0010 are replaced
 * by the same triggers routing each change by that line; payments land in the hot table, which
 * holds about two hours of every agent (a few pages) however long the history. The store's mover
 * (capRows.ts) raises the line to the previous hour once an hour has passed, moving the hot rows
 * below it into cap_buckets in the same transaction (and lowers it the same way after the clock
 * went back). A sum reads both tables with the same range
 * each (the cap sum, payments.ts), so it is exact wherever the line is: a stopped mover or a clock
 * jump makes the hot table larger or sends fresh rows to cap_buckets, slower, never wrong.
 *
 * The line starts at the hour before now (SQLite's clock), and existing buckets at or above it
 * move to the hot table. migrate-store and the stores' comparisons read cap_buckets as the union
 * of the two (CAP_BUCKETS_UNION).
 *
 * PostgreSQL: nothing changes (the version is kept so both stores' lists stay equal). It keeps one
 * cap_buckets: its bucket rows are updated in place on heap pages filled in the order the
 * agent-hours began, not rewritten in key order. Never edit once landed: add the next migration.
 */
/** Tables only SQLite has, derived from transactions by triggers (migrate-store skips them). */
export const SQLITE_ONLY_TABLES: readonly string[] = [...CAP_ROWS_TABLES, 'cap_buckets_hot', 'cap_hot_from'];

/**
 * Every agent-hour bucket, as one relation with cap_buckets' columns. The tables are disjoint; an
 * agent-hour in both (a hand edit) is still summed once, as the cap sum adds them.
 */
export const CAP_BUCKETS_UNION = `(SELECT agent_id, bucket, SUM(total) AS total FROM (SELECT agent_id, bucket, total FROM cap_buckets
  UNION ALL SELECT agent_id, bucket, total FROM cap_buckets_hot) GROUP BY agent_id, bucket)`;

/**
 * Adds (or, with '-', takes out) `row`'s amount to its hour, in the table its hour belongs to;
 * with `ifHeld`, only when `row` holds the cap (the UPDATE trigger's statements; the others' WHEN
 * already says so).
 */
const add = (row: 'NEW' | 'OLD', sign: '' | '-', ifHeld = false) => {
  const bucket = capBucketOf(`${row}.cap_at`);
  const held = ifHeld ? ` AND ${row}.holds_cap = 1` : '';
  const into = (table: string, side: '>=' | '<') => `INSERT INTO ${table} (agent_id, bucket, total)
    SELECT ${row}.agent_id, ${bucket}, ${sign}${row}.amount_micros WHERE ${bucket} ${side} (SELECT bucket FROM cap_hot_from)${held}
    ON CONFLICT (agent_id, bucket) DO UPDATE SET total = total + excluded.total;`;
  return `${into('cap_buckets_hot', '>=')}\n  ${into('cap_buckets', '<')}`;
};

const sqlite = `
CREATE TABLE cap_buckets_hot (
  agent_id TEXT NOT NULL,
  bucket   INTEGER NOT NULL,
  total    INTEGER NOT NULL,
  PRIMARY KEY (agent_id, bucket)
) STRICT, WITHOUT ROWID;

CREATE TABLE cap_hot_from (
  one    INTEGER PRIMARY KEY CHECK (one = 1),
  bucket INTEGER NOT NULL
) STRICT;

INSERT INTO cap_hot_from (one, bucket) VALUES (1, CAST(strftime('%s', 'now') AS INTEGER) / 3600 - 1);
INSERT INTO cap_buckets_hot (agent_id, bucket, total)
  SELECT agent_id, bucket, total FROM cap_buckets WHERE bucket >= (SELECT bucket FROM cap_hot_from);
DELETE FROM cap_buckets WHERE bucket >= (SELECT bucket FROM cap_hot_from);

DROP TRIGGER transactions_cap_insert;
DROP TRIGGER transactions_cap_update;
DROP TRIGGER transactions_cap_delete;

CREATE TRIGGER transactions_cap_insert AFTER INSERT ON transactions WHEN NEW.holds_cap = 1
BEGIN
  ${add('NEW', '')}
END;

CREATE TRIGGER transactions_cap_update AFTER UPDATE OF holds_cap, cap_at, amount_micros, agent_id ON transactions
WHEN (OLD.holds_cap = 1 OR NEW.holds_cap = 1) AND (NEW.holds_cap IS NOT OLD.holds_cap
  OR NEW.cap_at IS NOT OLD.cap_at OR NEW.amount_micros IS NOT OLD.amount_micros OR NEW.agent_id IS NOT OLD.agent_id)
BEGIN
  ${add('OLD', '-', true)}
  ${add('NEW', '', true)}
END;

CREATE TRIGGER transactions_cap_delete AFTER DELETE ON transactions WHEN OLD.holds_cap = 1
BEGIN
  ${add('OLD', '-')}
END;
`;

const postgres = `SELECT 1;`;

export const migration: Migration = { version: 12, name: 'cap_buckets_hot', sqlite, postgres };
