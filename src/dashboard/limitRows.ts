import { MAX_LIMITS, parseLimitRecipient, parseMaxCount, parseWindow, type SpendLimit } from '../domain/limits.js';
import { invalidArgument } from '../domain/errors.js';
import { formatUsd, parseUsd } from '../domain/money.js';
import { maxNetworkFeeFromEth, maxNetworkFeeMessage, weiToEthText } from './ether.js';
import { usd, wei } from './format.js';
import { html, type Html } from './html.js';
import { fieldError, invalidAttrs, tableWrap } from './layout.js';
import { validationMessage, type FormFields } from './routes.js';

/**
 * Window limits as rows of a form, for the agent's policy form and the organization's limits:
 * each row is one limit's fields as typed (the fee in ETH, like the policy's fee ceiling), posted
 * as repeated fields in row order. A blank row is ignored, so the form always offers one to fill
 * in; "Add a limit row" posts the form back for one more, and a row's Remove box leaves it out of
 * what is saved. Each field is checked by the function parseLimits uses for it, with a message
 * that names the row as the form numbers it ("Limit 2: window must be …").
 */

export type LimitRow = { window: string; maxUsd: string; maxCount: string; maxFeeEth: string; recipient: string };
type RowField = keyof LimitRow;

/** The rows as typed, and the numbers (from 1) of those whose Remove box is ticked. */
export type LimitRows = { rows: LimitRow[]; removed: number[] };

/** Field name of each column; every row posts all five, in row order. */
const NAMES = { window: 'limit_window', maxUsd: 'limit_max_usd', maxCount: 'limit_max_count', maxFeeEth: 'limit_max_fee_eth', recipient: 'limit_recipient' } as const;
const COLUMNS = Object.keys(NAMES) as RowField[];
const REMOVE = 'limit_remove';
/** The submit button that asks for one more row instead of saving. */
export const ADD_ROW = 'limit_add';
/** The fields a form with limit rows carries (routes.ts `fields`) and those it repeats (`repeatable`). */
export const LIMIT_REPEATABLE = [...Object.values(NAMES), REMOVE] as const;
export const LIMIT_FIELDS = [...LIMIT_REPEATABLE, ADD_ROW] as const;

/** How the form labels each field; messages use the same words. */
const LABELS: Record<RowField, string> = { window: 'window', maxUsd: 'max USD', maxCount: 'max payments', maxFeeEth: 'max fees', recipient: 'recipient' };

const BLANK: LimitRow = { window: '', maxUsd: '', maxCount: '', maxFeeEth: '', recipient: '' };

function isBlank(row: LimitRow): boolean {
  return COLUMNS.every((c) => row[c] === '');
}

/** A stored limit as the form shows it. */
function rowOf(l: SpendLimit): LimitRow {
  return {
    window: l.window, maxUsd: l.maxMicros === null ? '' : formatUsd(l.maxMicros), maxCount: l.maxCount === null ? '' : String(l.maxCount),
    maxFeeEth: l.maxNetworkFeeWei === null ? '' : weiToEthText(l.maxNetworkFeeWei), recipient: l.recipient ?? '',
  };
}

/** Saved limits as rows, with one blank row to add a limit. */
export function rowsOfLimits(limits: readonly SpendLimit[]): LimitRows {
  return { rows: [...limits.map(rowOf), { ...BLANK }], removed: [] };
}

/** The same rows with one more blank row (what "Add a limit row" answers), at most one past the most a policy may hold. */
export function withBlankRow(r: LimitRows): LimitRows {
  return r.rows.length > MAX_LIMITS ? r : { rows: [...r.rows, { ...BLANK }], removed: r.removed };
}

/**
 * The rows a form carries, or undefined when it carries none (a form from before the rows: the
 * limits stay as they are). Columns of different lengths or a Remove box that names no row cannot
 * come from the page and are refused whole.
 */
export function limitRowsFromForm(form: FormFields): LimitRows | undefined {
  if (!COLUMNS.some((c) => form.has(NAMES[c])) && !form.has(REMOVE)) return undefined;
  const columns = COLUMNS.map((c) => form.getAll(NAMES[c]));
  const count = columns[0]!.length;
  if (columns.some((values) => values.length !== count)) throw invalidArgument('The limit rows arrived incomplete: nothing was changed.');
  const rows = Array.from({ length: count }, (_, i) => Object.fromEntries(COLUMNS.map((c, k) => [c, columns[k]![i]!])) as LimitRow);
  const removed = form.getAll(REMOVE).map((v) => (/^[1-9]\d{0,3}$/.test(v) ? Number(v) : 0));
  if (removed.some((n) => n < 1 || n > count)) throw invalidArgument('A Remove box names no limit row: nothing was changed.');
  return { rows, removed };
}

/** Field errors by `row:field` (row numbers from 1), and one for the whole list. */
export type LimitRowErrors = { fields: Map<string, string>; list?: string };

const kept = (r: LimitRows) => r.rows.map((row, i) => ({ row, n: i + 1 })).filter(({ row, n }) => !isBlank(row) && !r.removed.includes(n));

/** What is wrong with each row that will be saved; empty when nothing is. */
export function limitRowErrors(r: LimitRows): LimitRowErrors {
  const fields = new Map<string, string>();
  const label = (n: number, c: RowField) => `Limit ${n}: ${LABELS[c]}`;
  const check = (n: number, c: RowField, message: string | undefined) => message !== undefined && fields.set(`${n}:${c}`, message);
  for (const { row, n } of kept(r)) {
    check(n, 'window', validationMessage(() => parseWindow(row.window, label(n, 'window'))));
    if (row.maxUsd !== '') check(n, 'maxUsd', validationMessage(() => parseUsd(row.maxUsd, label(n, 'maxUsd'))));
    if (row.maxCount !== '') check(n, 'maxCount', validationMessage(() => parseMaxCount(countOf(row.maxCount), label(n, 'maxCount'))));
    if (row.maxFeeEth !== '') check(n, 'maxFeeEth', maxNetworkFeeMessage(row.maxFeeEth, label(n, 'maxFeeEth')));
    if (row.recipient !== '') check(n, 'recipient', validationMessage(() => parseLimitRecipient(row.recipient, label(n, 'recipient'))));
    if (row.maxUsd === '' && row.maxCount === '' && row.maxFeeEth === '') {
      check(n, 'maxUsd', `Limit ${n} limits nothing: give it a max USD, max payments or max fees`);
    }
  }
  const count = kept(r).length;
  return { fields, list: count > MAX_LIMITS ? `At most ${MAX_LIMITS} limits may be saved; the form has ${count}` : undefined };
}

export function hasLimitErrors(e: LimitRowErrors): boolean {
  return e.fields.size > 0 || e.list !== undefined;
}

/** Digits as a number; anything else stays text, which parseMaxCount refuses. */
function countOf(text: string): number | string {
  return /^\d{1,10}$/.test(text) ? Number(text) : text;
}

/** The rows to save, as the policy document writes limits; only after limitRowErrors found nothing. */
export function limitsOfRows(r: LimitRows): Array<Record<string, string | number>> {
  return kept(r).map(({ row }) => {
    const out: Record<string, string | number> = { window: row.window };
    if (row.maxUsd !== '') out.max_usd = row.maxUsd;
    if (row.maxCount !== '') out.max_count = Number(row.maxCount);
    if (row.maxFeeEth !== '') out.max_network_fee_wei = maxNetworkFeeFromEth(row.maxFeeEth, LABELS.maxFeeEth).toString();
    if (row.recipient !== '') out.recipient = row.recipient;
    return out;
  });
}

/** The id of a row's input, for its label and for the error summary's link. */
function inputId(prefix: string, n: number, c: RowField): string {
  return `${prefix}-${n}-${c === 'maxUsd' ? 'usd' : c === 'maxCount' ? 'count' : c === 'maxFeeEth' ? 'fee' : c}`;
}

/** The error summary's entries for the rows: [input id, message], in the order of the form. */
export function limitErrorLinks(prefix: string, r: LimitRows, e: LimitRowErrors): Array<[string, string | undefined]> {
  const links: Array<[string, string | undefined]> = [[`${prefix}-list`, e.list]];
  r.rows.forEach((_, i) => {
    for (const c of COLUMNS) links.push([inputId(prefix, i + 1, c), e.fields.get(`${i + 1}:${c}`)]);
  });
  return links;
}

/** What the rows take, said once above them: the labels stay one line each, so the inputs line up. */
export const LIMIT_ROWS_HELP = 'Window: a whole number of minutes, hours or days, such as 30m, 1h or 7d (1m to 366d). Max fees: ETH of network fees in the window. Recipient: a 0x address or registry service slug, or empty for every payment. A limit needs at least one maximum; an empty row adds nothing.';
const INPUT_MODE: Record<RowField, string> = { window: 'text', maxUsd: 'decimal', maxCount: 'numeric', maxFeeEth: 'decimal', recipient: 'text' };

/**
 * The rows as fieldsets ("Limit 1", "Limit 2", …), each field labelled and tied to its message,
 * then the button for another row. `prefix` keeps the ids apart when a page has two editors.
 */
export function limitRowsFieldset(prefix: string, r: LimitRows, e: LimitRowErrors): Html {
  const rows = r.rows.map((row, i) => {
    const n = i + 1;
    const field = (c: RowField) => {
      const id = inputId(prefix, n, c);
      const message = e.fields.get(`${n}:${c}`);
      return html`<div class="field"><label for="${id}">${LABELS[c][0]!.toUpperCase()}${LABELS[c].slice(1)}${c === 'maxFeeEth' ? ' (ETH)' : ''}</label>
<input type="text" inputmode="${INPUT_MODE[c]}" id="${id}" name="${NAMES[c]}" value="${row[c]}" spellcheck="false" autocomplete="off" ${invalidAttrs(id, message)}>
${fieldError(id, message)}</div>`;
    };
    const remove = isBlank(row)
      ? ''
      : html`<div class="field check"><input type="checkbox" id="${prefix}-${n}-remove" name="${REMOVE}" value="${n}" ${r.removed.includes(n) ? html`checked` : ''}><label for="${prefix}-${n}-remove">Remove</label></div>`;
    return html`<fieldset class="limit-row"><legend>Limit ${n}</legend><div class="limit-fields">${COLUMNS.map(field)}${remove}</div></fieldset>`;
  });
  const add = r.rows.length > MAX_LIMITS
    ? html`<p class="small muted">A policy holds at most ${MAX_LIMITS} limits.</p>`
    : html`<button type="submit" name="${ADD_ROW}" value="1">Add a limit row</button>`;
  return html`<div class="limit-rows" id="${prefix}-list" tabindex="-1">
${e.list === undefined ? '' : html`<p class="field-error">${e.list}</p>`}
${rows}
</div>${add}`;
}

/** Limits read-only, one row each: `whose` names the column's owner for each limit, or is omitted. */
export function limitsTable(label: string, rows: ReadonlyArray<readonly [whose: string | undefined, limit: SpendLimit]>): Html {
  const whose = rows.some(([w]) => w !== undefined);
  return tableWrap(label, html`<table><thead><tr>${whose ? html`<th scope="col">Whose</th>` : ''}<th scope="col">Window</th><th scope="col">Recipient</th><th scope="col">Max USD</th><th scope="col">Max payments</th><th scope="col">Max network fee</th></tr></thead><tbody>
${rows.map(([w, l]) => html`<tr>${whose ? html`<td>${w}</td>` : ''}<td>${l.window}</td><td>${l.recipient === null ? 'every recipient' : html`<code>${l.recipient}</code>`}</td>
<td>${l.maxMicros === null ? '—' : usd(l.maxMicros)}</td><td>${l.maxCount === null ? '—' : String(l.maxCount)}</td><td>${l.maxNetworkFeeWei === null ? '—' : wei(l.maxNetworkFeeWei)}</td></tr>`)}
</tbody></table>`);
}
