import type { WindowSpec, WindowsQuery, WindowUse } from './port.js';

/**
 * How both stores measure a window limit from its running sums (migration 0019): the SQL, in each
 * store's dialect, and the arithmetic. A window's state holds the sums of the rows holding the cap
 * that it covers with cap_at > as_of - window (the triggers keep that exact as rows change).
 * Measuring at `now`:
 *
 *   no state yet        sum the window's rows, and (in a write) keep them as the state at now;
 *   now after as_of     take away the rows whose cap_at the window has passed, (as_of - w, now - w];
 *   now before as_of    (another replica's clock ahead) add back (now - w, as_of - w];
 *
 * then take away pending approvals past their expiry (they stop holding at once, before the
 * sweep releases them) and the row being re-checked. Every step reads a slice of the
 * organization's rows by time (transactions_limits): what left the window since it was last
 * measured, not all it holds.
 */

/** Sums as the state keeps them: whole USD, micro-USD remainder, count, fee in units of 10^9 gwei, gwei remainder. */
export type Sums = readonly [bigint, bigint, bigint, bigint, bigint];

const ZERO: Sums = [0n, 0n, 0n, 0n, 0n];
/** Beyond any cap_at: a scan with no upper bound. */
export const NO_END = 2n ** 62n;

export function sumsOf(row: readonly unknown[] | undefined): Sums {
  if (!row) return ZERO;
  return row.slice(0, 5).map((v) => (v === null || v === undefined ? 0n : BigInt(v as bigint | number | string))) as unknown as Sums;
}
export const plus = (a: Sums, b: Sums): Sums => a.map((v, i) => v + b[i]!) as unknown as Sums;
export const minus = (a: Sums, b: Sums): Sums => a.map((v, i) => v - b[i]!) as unknown as Sums;
export const useOf = (s: Sums): WindowUse => ({ micros: s[0] * 1_000_000n + s[1], count: Number(s[2]), feeGwei: s[3] * 1_000_000_000n + s[4] });

/** A window's state key: the organization, the agent ('' for the organization's), the recipient ('' for every one), the length. */
export function keyOf(q: WindowsQuery, w: WindowSpec): [string, string, string, bigint] {
  return [q.orgId, w.agentId ?? '', w.recipient ?? '', BigInt(q.now - w.since)];
}

type Dialect = 'sqlite' | 'postgres';
const param = (d: Dialect, n: number, type: 'text' | 'bigint') => (d === 'sqlite' ? `@p${n}` : `$${n}::${type}`);

const SUMS = `SUM(t.amount_micros / 1000000), SUM(t.amount_micros % 1000000), COUNT(*), SUM(t.fee_gwei / 1000000000), SUM(t.fee_gwei % 1000000000)`;

/** The rows a window covers with cap_at in (p2, p3]: parameters 1 organization, 2 and 3 the bounds, 4 agent, 5 recipient. */
function covered(d: Dialect): string {
  const rec = param(d, 5, 'text');
  const split = d === 'sqlite' ? `instr(t.split_recipients, ',' || ${rec} || ',') > 0` : `strpos(t.split_recipients, ',' || ${rec} || ',') > 0`;
  return `t.org_id = ${param(d, 1, 'text')} AND t.holds_cap = 1 AND t.cap_at > ${param(d, 2, 'bigint')} AND t.cap_at <= ${param(d, 3, 'bigint')}
  AND (${param(d, 4, 'text')} IS NULL OR t.agent_id = ${param(d, 4, 'text')}) AND (${rec} IS NULL OR t.recipient = ${rec} OR t.service_slug = ${rec} OR ${split})`;
}

export function limitStatesSql(d: Dialect) {
  const p = (n: number, type: 'text' | 'bigint') => param(d, n, type);
  const key = `org_id = ${p(1, 'text')} AND agent_id = ${p(2, 'text')} AND recipient = ${p(3, 'text')} AND window_ms = ${p(4, 'bigint')}`;
  return {
    /** Parameters 1–4: the key. */
    state: `SELECT usd, micros, count, fee_e9, fee_gwei, as_of FROM limit_states WHERE ${key}`,
    /** Parameters 1–5 (covered). */
    scan: `SELECT ${SUMS} FROM transactions t WHERE ${covered(d)}`,
    /**
     * 1 organization, 2 now: its payments waiting for an approval past its expiry, found from the
     * approvals, each payment by its id. CROSS JOIN keeps SQLite from reading a window's rows to
     * find them, and the payment's own conditions are written so that no index serves them (`|| ''`,
     * `+ 0`): PostgreSQL otherwise read every pending payment of every organization for each one.
     */
    overdue: `SELECT t.agent_id, t.recipient, t.service_slug, t.split_recipients, t.cap_at, t.amount_micros, t.fee_gwei
  FROM approvals a CROSS JOIN transactions t
  WHERE a.status = 'pending' AND a.expires_at <= ${p(2, 'bigint')} AND a.org_id = ${p(1, 'text')} AND t.id = a.transaction_id
  AND t.status || '' = 'pending_approval' AND t.holds_cap + 0 = 1`,
    /** covered, 6 now, 7 the row: the row being re-checked, when it counts (not an overdue approval, taken away already). */
    own: `SELECT ${SUMS} FROM transactions t WHERE t.id = ${p(7, 'text')} AND ${covered(d)}
  AND NOT (t.status = 'pending_approval' AND EXISTS (SELECT 1 FROM approvals a WHERE a.id = t.approval_id AND a.status = 'pending' AND a.expires_at <= ${p(6, 'bigint')}))`,
    /** Parameters 1–4 the key, 5 as_of, 6–10 the sums. */
    insert: `INSERT INTO limit_states (org_id, agent_id, recipient, window_ms, as_of, usd, micros, count, fee_e9, fee_gwei)
  VALUES (${p(1, 'text')}, ${p(2, 'text')}, ${p(3, 'text')}, ${p(4, 'bigint')}, ${p(5, 'bigint')}, ${p(6, 'bigint')}, ${p(7, 'bigint')}, ${p(8, 'bigint')}, ${p(9, 'bigint')}, ${p(10, 'bigint')})`,
    update: `UPDATE limit_states SET as_of = ${p(5, 'bigint')}, usd = ${p(6, 'bigint')}, micros = ${p(7, 'bigint')}, count = ${p(8, 'bigint')}, fee_e9 = ${p(9, 'bigint')}, fee_gwei = ${p(10, 'bigint')}
  WHERE ${key}`,
  };
}

/** The overdue query's row: agent, recipient, slug, split recipients, cap_at, amount, fee. */
export type OverdueRow = readonly [string, string, string, string, bigint | number, bigint | number, bigint | number];

/** What the overdue rows a window covers add up to. */
export function overdueIn(rows: readonly OverdueRow[], w: WindowSpec): Sums {
  let sums: Sums = ZERO;
  for (const [agent, recipient, slug, splits, capAt, amount, fee] of rows) {
    if (BigInt(capAt) <= BigInt(w.since) || (w.agentId !== null && agent !== w.agentId)) continue;
    if (w.recipient !== null && recipient !== w.recipient && slug !== w.recipient && !splits.includes(`,${w.recipient},`)) continue;
    const a = BigInt(amount);
    const f = BigInt(fee);
    sums = plus(sums, [a / 1_000_000n, a % 1_000_000n, 1n, f / 1_000_000_000n, f % 1_000_000_000n]);
  }
  return sums;
}

/** The parameters of `covered` for a window and a slice (from, to]. */
export function coveredParams(q: WindowsQuery, w: WindowSpec, from: bigint, to: bigint): unknown[] {
  return [q.orgId, from, to, w.agentId, w.recipient];
}

/** SQLite binds numbered parameters by name: @p1, @p2, … */
export function named(params: readonly unknown[]): Record<string, unknown> {
  return Object.fromEntries(params.map((v, i) => [`p${i + 1}`, v]));
}
