import type { Migration } from './migration.js';

/**
 * The cap sum's rows for the partial hour, indexed late (SQLite only, PostgreSQL keeps its
 * per-row index). committedSince reads whole hours from cap_buckets (0010) and the rows of the one
 * hour `since` falls in, 24 hours back. A per-agent index of those rows, transactions_cap (agent_id,
 * holds_cap, cap_at, amount_micros), costs a page per payment: with many agents every payment's
 * entry lands on a different leaf page, so each group commit writes about one more 4 KiB WAL frame
 * per payment, measured as 30-40 µs of the event loop per payment and a sixth of the sign throughput.
 *
 * The rows the edge needs are a day old, so they need not be indexed per agent the moment they are
 * written. cap_rows holds exactly the rows with holds_cap = 1 and cap_at <= cap_horizon.horizon,
 * keyed by agent and time (transactions_cap's content). Triggers keep that exact under every insert,
 * update and delete, in the same transaction (so under rollback too). The store's mover
 * (src/store/capRows.ts) raises the horizon a few seconds behind the clock, in a write of its own
 * that copies the rows it passes, thousands at a time, sorted by agent: each agent's leaf page is
 * written once per move instead of once per payment. Rows above the horizon are found through
 * transactions_cap_time, a time-ordered index that fresh rows append to (one page per commit).
 * A sum over (since, end) reads cap_rows below the horizon and the time index above it, so it is
 * exact whatever the horizon is: a stopped mover or a clock jump makes it slower, never wrong.
 *
 * The horizon starts at the newest cap_at in the ledger (or now, if a row is dated in the future),
 * and every holding row up to it is copied here.
 *
 * PostgreSQL: nothing changes (the version is kept so both stores' lists stay equal, which
 * migrate-store requires). It keeps transactions_cap: its commits are not bound by SQLite's
 * one-writer WAL frames, and a replica's reads must see the other replicas' rows at once, which a
 * horizon kept by one process would not. Never edit once landed: add the next migration.
 */
/** Tables only SQLite has, derived from transactions by the triggers below (migrate-store skips them). */
export const SQLITE_ONLY_TABLES: readonly string[] = ['cap_horizon', 'cap_rows'];
/** The one index that differs: SQLite's time index here, PostgreSQL's per-agent transactions_cap (kept there). */
export const SQLITE_ONLY_INDEXES: readonly string[] = ['transactions_cap_time'];
export const PG_ONLY_INDEXES: readonly string[] = ['transactions_cap'];

const sqlite = `
CREATE TABLE cap_rows (
  agent_id      TEXT NOT NULL,
  cap_at        INTEGER NOT NULL,
  id            TEXT NOT NULL,
  amount_micros INTEGER NOT NULL,
  PRIMARY KEY (agent_id, cap_at, id)
) STRICT, WITHOUT ROWID;

CREATE TABLE cap_horizon (
  one     INTEGER PRIMARY KEY CHECK (one = 1),
  horizon INTEGER NOT NULL
) STRICT;

INSERT INTO cap_horizon (one, horizon)
  SELECT 1, MIN(COALESCE(MAX(cap_at), 0), CAST(strftime('%s', 'now') AS INTEGER) * 1000) FROM transactions;
INSERT INTO cap_rows (agent_id, cap_at, id, amount_micros)
  SELECT agent_id, cap_at, id, amount_micros FROM transactions WHERE holds_cap = 1 AND cap_at <= (SELECT horizon FROM cap_horizon);

CREATE INDEX transactions_cap_time ON transactions (cap_at) WHERE holds_cap = 1;
DROP INDEX transactions_cap;

CREATE TRIGGER transactions_cap_rows_insert AFTER INSERT ON transactions
WHEN NEW.holds_cap = 1 AND NEW.cap_at <= (SELECT horizon FROM cap_horizon)
BEGIN
  INSERT INTO cap_rows (agent_id, cap_at, id, amount_micros) VALUES (NEW.agent_id, NEW.cap_at, NEW.id, NEW.amount_micros);
END;

CREATE TRIGGER transactions_cap_rows_update AFTER UPDATE OF holds_cap, cap_at, amount_micros, agent_id, id ON transactions
WHEN (OLD.holds_cap = 1 OR NEW.holds_cap = 1) AND MIN(OLD.cap_at, NEW.cap_at) <= (SELECT horizon FROM cap_horizon)
BEGIN
  DELETE FROM cap_rows WHERE agent_id = OLD.agent_id AND cap_at = OLD.cap_at AND id = OLD.id;
  INSERT INTO cap_rows (agent_id, cap_at, id, amount_micros)
    SELECT NEW.agent_id, NEW.cap_at, NEW.id, NEW.amount_micros WHERE NEW.holds_cap = 1 AND NEW.cap_at <= (SELECT horizon FROM cap_horizon);
END;

CREATE TRIGGER transactions_cap_rows_delete AFTER DELETE ON transactions
WHEN OLD.holds_cap = 1 AND OLD.cap_at <= (SELECT horizon FROM cap_horizon)
BEGIN
  DELETE FROM cap_rows WHERE agent_id = OLD.agent_id AND cap_at = OLD.cap_at AND id = OLD.id;
END;
`;

const postgres = `SELECT 1;`;

export const migration: Migration = { version: 11, name: 'cap_rows', sqlite, postgres };
