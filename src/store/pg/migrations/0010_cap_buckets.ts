import { capBucketOf } from '../../migrations/0010_cap_buckets.js';

/**
 * PostgreSQL twin of ../../migrations/0010_cap_buckets.ts (its header states what cap_buckets
 * holds and why): the same table, backfill and bucket expression, the triggers as one PL/pgSQL
 * function. The trigger's WHEN runs before any function call, so an UPDATE that changes none of
 * holds_cap, cap_at, amount_micros, agent_id (the settle) costs only the comparison.
 *
 * Under SERIALIZABLE the bucket row is also where concurrent payments of one agent meet: both
 * read it (the cap check) and both UPSERT it, so the second waits for the first and then fails
 * with serialization_failure; the unit of work runs it again (queued on the agent's `cap:` hot
 * spot, payments.committedSince). Other agents' buckets are other rows. Background moves of the
 * agent's rows (approval expiry, the tracker's revert, the stale-signing repair) write the same
 * bucket and are retried the same way. Never edit once landed.
 */
const add = (row: 'NEW' | 'OLD', sign: '' | '-') => `INSERT INTO cap_buckets (agent_id, bucket, total)
      VALUES (${row}.agent_id, ${capBucketOf(`${row}.cap_at`)}, ${sign}${row}.amount_micros)
      ON CONFLICT (agent_id, bucket) DO UPDATE SET total = cap_buckets.total + excluded.total;`;

export const sql = `
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
      ${add('OLD', '-')}
    END IF;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    IF NEW.holds_cap = 1 THEN
      ${add('NEW', '')}
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
