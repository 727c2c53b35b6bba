import type { Migration } from './migration.js';

/**
 * Running sums of the window limits, so that a decision measures a window by reading one row and
 * the few rows that left it since the last decision, instead of summing every row in it.
 *
 * A state row is one window of one scope: an organization (`agent_id` '') or an agent, every
 * recipient (`recipient` '') or one, `window_ms` long. Its sums are exactly those of the rows
 * holding the cap (holds_cap = 1) that it covers with cap_at > as_of - window_ms, the ledger as it
 * is now: the triggers below add a row when it comes to count at the state's as_of and take it
 * away when it stops (a hold's end, a moved cap_at, a delete), in the same transaction, so under
 * rollback too. The store (payments.ts windowUses) creates a state the first time a window is
 * measured, and moves as_of forward by taking away the rows whose cap_at the window has passed.
 * Pending approvals past their expiry are taken away when a window is read, as the cap sum does.
 *
 * Amounts are kept as whole USD and the micro-USD remainder (fees as units of 10^9 gwei and the
 * remainder), so that no sum can overflow a 64-bit integer.
 *
 * Never edit once landed: add the next migration.
 */

/**
 * The states `row` counts in, as two statements: the organization's (agent_id '') and its agent's,
 * each a seek on the key's first two columns (one statement with `agent_id = '' OR agent_id = x`
 * read every state of the organization, a thousand for 256 agents with four limits each).
 */
function add(row: string, sign: '+' | '-', dialect: 'sqlite' | 'postgres', when = ''): string {
  const split = dialect === 'sqlite' ? `instr(${row}.split_recipients, ',' || recipient || ',') > 0` : `strpos(${row}.split_recipients, ',' || recipient || ',') > 0`;
  const update = (agent: string) => `UPDATE limit_states SET usd = usd ${sign} ${row}.amount_micros / 1000000, micros = micros ${sign} ${row}.amount_micros % 1000000,
    count = count ${sign} 1, fee_e9 = fee_e9 ${sign} ${row}.fee_gwei / 1000000000, fee_gwei = fee_gwei ${sign} ${row}.fee_gwei % 1000000000
    WHERE ${when}org_id = ${row}.org_id AND agent_id = ${agent}
    AND (recipient = '' OR recipient = ${row}.recipient OR recipient = ${row}.service_slug OR ${split})
    AND ${row}.cap_at > as_of - window_ms;`;
  return `${update("''")}\n  ${update(`${row}.agent_id`)}`;
}

/** The columns whose change can change what a row adds to a state. */
const WATCHED = ['holds_cap', 'cap_at', 'amount_micros', 'fee_gwei', 'org_id', 'agent_id', 'recipient', 'service_slug', 'split_recipients'];

const sqlite = `
CREATE TABLE limit_states (
  org_id    TEXT NOT NULL,
  agent_id  TEXT NOT NULL,
  recipient TEXT NOT NULL,
  window_ms INTEGER NOT NULL CHECK (window_ms > 0),
  as_of     INTEGER NOT NULL,
  usd       INTEGER NOT NULL,
  micros    INTEGER NOT NULL,
  count     INTEGER NOT NULL,
  fee_e9    INTEGER NOT NULL,
  fee_gwei  INTEGER NOT NULL,
  PRIMARY KEY (org_id, agent_id, recipient, window_ms)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER transactions_limits_insert AFTER INSERT ON transactions WHEN NEW.holds_cap = 1
BEGIN
  ${add('NEW', '+', 'sqlite')}
END;

CREATE TRIGGER transactions_limits_update AFTER UPDATE OF ${WATCHED.join(', ')} ON transactions
WHEN (OLD.holds_cap = 1 OR NEW.holds_cap = 1) AND (${WATCHED.map((c) => `NEW.${c} IS NOT OLD.${c}`).join(' OR ')})
BEGIN
  ${add('OLD', '-', 'sqlite', 'OLD.holds_cap = 1 AND ')}
  ${add('NEW', '+', 'sqlite', 'NEW.holds_cap = 1 AND ')}
END;

CREATE TRIGGER transactions_limits_delete AFTER DELETE ON transactions WHEN OLD.holds_cap = 1
BEGIN
  ${add('OLD', '-', 'sqlite')}
END;
`;

const postgres = `
CREATE TABLE limit_states (
  org_id    TEXT COLLATE "C" NOT NULL,
  agent_id  TEXT COLLATE "C" NOT NULL,
  recipient TEXT COLLATE "C" NOT NULL,
  window_ms BIGINT NOT NULL CHECK (window_ms > 0),
  as_of     BIGINT NOT NULL,
  usd       BIGINT NOT NULL,
  micros    BIGINT NOT NULL,
  count     BIGINT NOT NULL,
  fee_e9    BIGINT NOT NULL,
  fee_gwei  BIGINT NOT NULL,
  PRIMARY KEY (org_id, agent_id, recipient, window_ms)
);

CREATE FUNCTION transactions_limit_states() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    IF OLD.holds_cap = 1 THEN
      ${add('OLD', '-', 'postgres')}
    END IF;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    IF NEW.holds_cap = 1 THEN
      ${add('NEW', '+', 'postgres')}
    END IF;
  END IF;
  RETURN NULL;
END $fn$;

CREATE TRIGGER transactions_limits_insert AFTER INSERT ON transactions
  FOR EACH ROW WHEN (NEW.holds_cap = 1) EXECUTE FUNCTION transactions_limit_states();
CREATE TRIGGER transactions_limits_update AFTER UPDATE OF ${WATCHED.join(', ')} ON transactions
  FOR EACH ROW WHEN ((OLD.holds_cap = 1 OR NEW.holds_cap = 1) AND (${WATCHED.map((c) => `OLD.${c} IS DISTINCT FROM NEW.${c}`).join(' OR ')}))
  EXECUTE FUNCTION transactions_limit_states();
CREATE TRIGGER transactions_limits_delete AFTER DELETE ON transactions
  FOR EACH ROW WHEN (OLD.holds_cap = 1) EXECUTE FUNCTION transactions_limit_states();
`;

export const migration: Migration = { version: 19, name: 'limit_states', sqlite, postgres };
