import type { Migration } from './migration.js';

/**
 * Per-agent running spend sums. Summing every row the agent has in the rolling 24 hours on each
 * payment and quote would be a range scan that grows with the agent's rate.
 * cap_buckets holds, per agent and hour (bucket = floor(cap_at / 1 h)), the sum of amount_micros of
 * the agent's rows with holds_cap = 1 and cap_at in that hour. payments.committedSince adds the
 * buckets entirely after `since` to the exact row sum of the one hour `since` falls in: the same
 * number as the full scan, for any `since`, rows in the future included.
 *
 * Kept by triggers on transactions, in the same transaction as every write, so it is exact under
 * rollback, across restarts and whoever writes the row (the app, a start-up repair, a bulk
 * INSERT): a row that starts holding the cap adds its amount to its hour, a row that stops (or
 * moves: cap_at, amount, agent) takes it out of the old hour and adds it to the new one. The
 * UPDATE trigger only fires when one of those four columns is in the SET and only acts when a value
 * changed, so the common settle (signing → signed, still holding) touches no bucket. It takes the
 * old amount out before it adds the new one (one trigger, two statements in order: SQLite runs
 * separate triggers newest first), so a bucket never passes through old + new, which could
 * overflow where the ledger itself does not. UPSERT both ways: a bucket never goes missing under
 * a subtraction. Hours are floored (negative cap_at too), in one expression both engines evaluate
 * alike (their % truncates toward zero).
 *
 * No foreign key to agents: the rows come only from transactions, which have one, and an FK check
 * per trigger run would cost a lookup on every payment. Buckets are never pruned (one row per
 * agent-hour with activity). The existing rows are summed in here.
 *
 * PostgreSQL: the same table, backfill and bucket expression, the triggers as one PL/pgSQL
 * function. The trigger's WHEN runs before any function call, so an UPDATE that changes none of
 * holds_cap, cap_at, amount_micros, agent_id (the settle) costs only the comparison. Under
 * SERIALIZABLE the bucket row is also where concurrent payments of one agent meet: both read it
 * (the cap check) and both UPSERT it, so the second fails with serialization_failure and the unit
 * of work runs it again (queued on the agent's `cap:` hot spot, payments.committedSince). Other
 * agents' buckets are other rows. Background moves of the agent's rows (approval expiry, the
 * tracker's revert, the stale-signing repair) write the same bucket and are retried the same way.
 * Never edit once landed: add the next migration.
 */
/** Width of one cap bucket, ms: one hour. */
export const CAP_BUCKET_MS = 3_600_000;

/** SQL of floor(`x` / CAP_BUCKET_MS) for an integer `x`, exact on both engines for negative `x` too. */
export function capBucketOf(x: string): string {
  return `((${x} - (${x} % ${CAP_BUCKET_MS} + ${CAP_BUCKET_MS}) % ${CAP_BUCKET_MS}) / ${CAP_BUCKET_MS})`;
}

/**
 * Adds (or, with '-', takes out) `row`'s amount to its hour; with `ifHeld`, only when `row` holds
 * the cap (the UPDATE trigger's two statements; the others' WHEN already says so).
 */
const add = (row: 'NEW' | 'OLD', sign: '' | '-', ifHeld = false) => {
  const values = `${row}.agent_id, ${capBucketOf(`${row}.cap_at`)}, ${sign}${row}.amount_micros`;
  return `INSERT INTO cap_buckets (agent_id, bucket, total)
    ${ifHeld ? `SELECT ${values} WHERE ${row}.holds_cap = 1` : `VALUES (${values})`}
    ON CONFLICT (agent_id, bucket) DO UPDATE SET total = total + excluded.total;`;
};
const addPostgres = (row: 'NEW' | 'OLD', sign: '' | '-') => `INSERT INTO cap_buckets (agent_id, bucket, total)
      VALUES (${row}.agent_id, ${capBucketOf(`${row}.cap_at`)}, ${sign}${row}.amount_micros)
      ON CONFLICT (agent_id, bucket) DO UPDATE SET total = cap_buckets.total + excluded.total;`;

const sqlite = `
CREATE TABLE cap_buckets (
  agent_id TEXT NOT NULL,
  bucket   INTEGER NOT NULL,
  total    INTEGER NOT NULL,
  PRIMARY KEY (agent_id, bucket)
) STRICT, WITHOUT ROWID;

INSERT INTO cap_buckets (agent_id, bucket, total)
  SELECT agent_id, ${capBucketOf('cap_at')}, SUM(amount_micros) FROM transactions WHERE holds_cap = 1
  GROUP BY agent_id, ${capBucketOf('cap_at')};

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

const postgres = `
CREATE TABLE cap_buckets (
  agent_id TEXT COLLATE "C" NOT NULL,
  bucket   BIGINT NOT NULL,
  total    BIGINT NOT NULL,
  PRIMARY KEY (agent_id, bucket)
);

INSERT INTO cap_buckets (agent_id, bucket, total)
  SELECT agent_id, ${capBucketOf('cap_at')}, SUM(amount_micros)::bigint FROM transactions WHERE holds_cap = 1
  GROUP BY agent_id, ${capBucketOf('cap_at')};

CREATE FUNCTION transactions_cap_buckets() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    IF OLD.holds_cap = 1 THEN
      ${addPostgres('OLD', '-')}
    END IF;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    IF NEW.holds_cap = 1 THEN
      ${addPostgres('NEW', '')}
    END IF;
  END IF;
  RETURN NULL;
END $fn$;

CREATE TRIGGER transactions_cap_insert AFTER INSERT ON transactions
  FOR EACH ROW WHEN (NEW.holds_cap = 1) EXECUTE FUNCTION transactions_cap_buckets();
CREATE TRIGGER transactions_cap_update AFTER UPDATE OF holds_cap, cap_at, amount_micros, agent_id ON transactions
  FOR EACH ROW WHEN ((OLD.holds_cap = 1 OR NEW.holds_cap = 1) AND (OLD.holds_cap IS DISTINCT FROM NEW.holds_cap
    OR OLD.cap_at IS DISTINCT FROM NEW.cap_at OR OLD.amount_micros IS DISTINCT FROM NEW.amount_micros OR OLD.agent_id IS DISTINCT FROM NEW.agent_id))
  EXECUTE FUNCTION transactions_cap_buckets();
CREATE TRIGGER transactions_cap_delete AFTER DELETE ON transactions
  FOR EACH ROW WHEN (OLD.holds_cap = 1) EXECUTE FUNCTION transactions_cap_buckets();
`;

export const migration: Migration = { version: 10, name: 'cap_buckets', sqlite, postgres };
