import { listAgents } from '../../app/organizations/agents.js';
import { listApprovals } from '../../app/approvals/approvals.js';
import { listTransactions, type ListTransactionsInput } from '../../app/organizations/ledger.js';
import { DomainError } from '../../domain/errors.js';
import { formatUsd } from '../../domain/money.js';
import { TRANSACTION_STATES } from '../../domain/transactionState.js';
import type { ChainTracking, TransactionRecord } from '../../domain/types.js';
import { transactionBadge } from '../badges.js';
import { csvRow } from '../csv.js';
import { checksum, iso, shortAddress, usd, utc } from '../format.js';
import { html, type Renderable } from '../html.js';
import { tableWrap } from '../layout.js';
import type { NodeResponse } from '../http.js';
import type { Reply, Route, RouteContext } from '../routes.js';

/** The filter menu: every transaction state (domain/transactionState.ts). */
const STATUSES = TRANSACTION_STATES;
const DAY_MS = 24 * 3600_000;
const PAGE_SIZE = 50;
/** An export stops here; a larger ledger is exported in date ranges. */
const MAX_EXPORT_ROWS = 100_000;
/**
 * Ledger rows one page view reads at most while it skips hidden pings. Agents that only ping add
 * up to one row each per 10 minutes (app/organizations/ping.ts), so a quiet day can be a long run of them.
 */
const MAX_SCANNED = 2_000;

/** `pings` is '1' when ping rows are shown; they are hidden otherwise, on the page and in the CSV alike. */
type Filters = { agent: string; status: string; from: string; to: string; pings: '' | '1' };

function readFilters(url: URL): Filters {
  const q = (name: string) => (url.searchParams.get(name) ?? '').trim();
  return { agent: q('agent'), status: q('status'), from: q('from'), to: q('to'), pings: q('pings') === '1' ? '1' : '' };
}

/** An agent's health check: a $0.00 `recorded` row (app/organizations/ping.ts). */
function isPing(t: TransactionRecord): boolean {
  return t.type === 'ping';
}

/** A `YYYY-MM-DD` date as its midnight UTC in epoch ms; `end` means the midnight after it. */
function parseDate(text: string, field: string, end: boolean): number | undefined {
  if (text === '') return undefined;
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(text) ? Date.parse(`${text}T00:00:00Z`) : NaN;
  if (Number.isNaN(ms)) throw new FilterError(`${field} must be a date like 2030-01-31`);
  return end ? ms + DAY_MS : ms;
}

class FilterError extends Error {}

/** Filters → ledger query. The agent filter is bound to the user's organization by orgId (listTransactions checks it is theirs). */
function toQuery(orgId: string, f: Filters): ListTransactionsInput {
  // Any status word is a valid filter (an unknown one matches nothing); the list only feeds the menu.
  if (f.status !== '' && !/^[a-z_]{1,32}$/.test(f.status)) throw new FilterError('status is not a status name');
  const from = parseDate(f.from, 'From', false);
  const to = parseDate(f.to, 'To', true);
  if (from !== undefined && to !== undefined && from >= to) throw new FilterError('From must be on or before To');
  return { orgId, agentId: f.agent, status: f.status, from, to };
}

function queryString(f: Filters, extra: Record<string, string> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...f, ...extra })) if (v !== '') q.set(k, v);
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

/**
 * The on-chain side of a raw transaction the service submits, under its ledger state: its chain
 * state, the current hash (full in the title) and, once mined, the confirmations counted so far.
 * Nothing for other rows.
 */
function chainLine(c: ChainTracking | undefined): Renderable {
  if (!c) return '';
  const hash = c.txHash ? html` <span class="mono nowrap" title="${c.txHash}">${c.txHash.slice(0, 10)}…</span>` : '';
  const confirmations = c.confirmations ? html` <span class="hint nowrap">(${c.confirmations} conf.)</span>` : '';
  return html`<div class="chain"><span class="hint">on chain</span> <span class="badge ${c.status === 'confirmed' ? 'badge-ok' : c.status === 'reverted' ? 'badge-bad' : 'badge-warn'}">${c.status}</span>${hash}${confirmations}</div>`;
}

/** Who paid: the address (in full in the title) and, under it, the registry service it belongs to. */
function recipientCell(t: TransactionRecord): Renderable {
  const address = t.recipient === '' ? '' : html`<span class="mono nowrap" title="${checksum(t.recipient)}">${shortAddress(t.recipient)}</span>`;
  return html`${address}${t.serviceSlug !== '' && html`<div class="service"><span class="hint">service</span> ${t.serviceSlug}</div>`}`;
}

/** What a person's approval recorded (app/approvals/approvals.ts decideApproval). */
type Approval = { decidedBy: string; decidedAt: number | null; note: string };

/**
 * Words of the reason a payment is given when it waits for a person (domain/policy.ts). Once the
 * payment is approved that reason is history: the row says who approved it instead. A reason
 * written later (a failure, an expiry, a revert, a note from the submitter) stays under it.
 */
const WAITED_FOR_APPROVAL = /exceeds the approval threshold/;

function reasonCell(t: TransactionRecord, approval: Approval | undefined): Renderable {
  if (!approval) return t.reason;
  const when = approval.decidedAt === null ? '' : html` <time datetime="${iso(approval.decidedAt)}" class="nowrap">${utc(approval.decidedAt)}</time>`;
  return html`<div class="approved-by">Approved by ${approval.decidedBy}${when}</div>${approval.note !== '' && html`<div>Note: ${approval.note}</div>`}${!WAITED_FOR_APPROVAL.test(t.reason) && t.reason !== '' && html`<div class="muted">${t.reason}</div>`}`;
}

/** The approved approvals among the page's rows, by id; empty when no row went through one. */
async function approvalsOf(ctx: RouteContext, rows: readonly TransactionRecord[]): Promise<Map<string, Approval>> {
  if (!rows.some((t) => t.approvalId !== null)) return new Map();
  // The organization's latest approved requests; a row approved before them keeps its stored reason.
  const approved = await listApprovals(ctx.deps, ctx.principal, ctx.principal.orgId, 'approved');
  return new Map(approved.map((a) => [a.id, a]));
}

/**
 * One page of the ledger. With pings hidden it reads in steps of exactly the rows still missing,
 * so the cursor after the last step starts the next page and no row is skipped or shown twice;
 * a long run of pings ends the page early (it still links the next one) after MAX_SCANNED rows.
 */
async function readPage(ctx: RouteContext, query: ListTransactionsInput, token: string, showPings: boolean) {
  const rows: TransactionRecord[] = [];
  let next = token;
  let scanned = 0;
  let hidden = 0;
  do {
    const r = await listTransactions(ctx.deps, ctx.principal, { ...query, pageSize: PAGE_SIZE - rows.length, pageToken: next });
    for (const t of r.transactions) {
      if (showPings || !isPing(t)) rows.push(t);
      else hidden++;
    }
    scanned += r.transactions.length;
    next = r.nextPageToken;
  } while (next !== '' && rows.length < PAGE_SIZE && scanned < MAX_SCANNED);
  return { rows, next, hidden, endedEarly: next !== '' && rows.length < PAGE_SIZE };
}

async function transactionsPage(ctx: RouteContext): Promise<Reply> {
  const { deps, url } = ctx;
  const filters = readFilters(url);
  const token = url.searchParams.get('page') ?? '';
  const agents = await listAgents(deps, ctx.principal, ctx.principal.orgId);
  const names = new Map(agents.map((a) => [a.id, a.name]));
  let rows: TransactionRecord[] = [];
  let next = '';
  let hidden = 0;
  let endedEarly = false;
  let problem: string | undefined;
  try {
    ({ rows, next, hidden, endedEarly } = await readPage(ctx, toQuery(ctx.principal.orgId, filters), token, filters.pings === '1'));
  } catch (err) {
    if (err instanceof FilterError) problem = err.message;
    else if (err instanceof DomainError && err.kind === 'invalid_argument') problem = err.shortMessage;
    else throw err;
  }
  const approvals = await approvalsOf(ctx, rows);
  const option = (value: string, label: string, current: string) => html`<option value="${value}" ${value === current ? html`selected` : ''}>${label}</option>`;
  // Classes c-* size each column and place each cell in the phone layout (static/styles.ts, .ledger).
  const body = rows.map((t) => html`<tr>
<td class="c-time nowrap"><time datetime="${iso(t.createdAt)}">${utc(t.createdAt)}</time></td>
<td class="c-agent">${names.get(t.agentId) ?? t.agentId}</td>
<td class="c-type nowrap">${t.type}</td>
<td class="c-status">${transactionBadge(t.status)}${chainLine(t.chain)}</td>
<td class="c-amount num">${usd(t.amountMicros)}</td>
<td class="c-recipient">${recipientCell(t)}</td>
<td class="c-reason wrap">${reasonCell(t, t.approvalId === null ? undefined : approvals.get(t.approvalId))}</td>
</tr>`);
  const pingNote = hidden > 0 || endedEarly
    ? html`<p class="muted small" data-hidden-pings>${hidden.toLocaleString('en-US')} ${hidden === 1 ? 'ping' : 'pings'} hidden${endedEarly ? html`; this page stops after ${MAX_SCANNED.toLocaleString('en-US')} rows read, the next page reads on` : ''}. Tick <em>Show pings</em> to list them.</p>`
    : '';
  return {
    type: 'page',
    status: problem ? 400 : 200,
    section: 'transactions',
    title: 'Transactions',
    content: html`<div class="page-head"><h1>Transactions</h1><a class="button" href="/dashboard/transactions.csv${queryString(filters)}" download>Download CSV</a></div>
<form class="panel filters" method="get" action="/dashboard/transactions" aria-label="Filters">
<div class="field"><label for="f-agent">Agent</label><select id="f-agent" name="agent">${option('', 'All agents', filters.agent)}${agents.map((a) => option(a.id, a.name, filters.agent))}</select></div>
<div class="field"><label for="f-status">Status</label><select id="f-status" name="status">${option('', 'Any status', filters.status)}${[...STATUSES, ...((STATUSES as readonly string[]).includes(filters.status) || filters.status === '' ? [] : [filters.status])].map((s) => option(s, s.replace('_', ' '), filters.status))}</select></div>
<div class="field"><label for="f-from">From <span class="hint">(UTC date)</span></label><input type="date" id="f-from" name="from" value="${filters.from}"></div>
<div class="field"><label for="f-to">To <span class="hint">(UTC date, inclusive)</span></label><input type="date" id="f-to" name="to" value="${filters.to}"></div>
<div class="field check"><input type="checkbox" id="f-pings" name="pings" value="1" ${filters.pings === '1' ? html`checked` : ''}><label for="f-pings">Show pings <span class="hint">($0.00 health checks)</span></label></div>
<div class="field"><button type="submit" class="primary">Apply</button> <a href="/dashboard/transactions">Reset</a></div>
</form>
${problem !== undefined && html`<p class="flash flash-error" role="alert" tabindex="-1" data-error-summary>${problem}</p>`}
${rows.length === 0 ? html`<p class="empty">${endedEarly ? 'Only pings so far; the next page reads on.' : 'No transactions match.'}</p>` : tableWrap('Transactions', html`<table class="ledger">
<caption class="sr-only">Transactions, newest first</caption>
<thead><tr><th scope="col">Time</th><th scope="col">Agent</th><th scope="col">Type</th><th scope="col">Status</th><th scope="col" class="num">Amount</th><th scope="col">Recipient</th><th scope="col">Reason</th></tr></thead>
<tbody>${body}</tbody></table>`, 'ledger-wrap')}
${pingNote}
<nav class="pager" aria-label="Pages">
${token !== '' && html`<a href="/dashboard/transactions${queryString(filters)}">First page</a>`}
${next !== '' && html`<a href="/dashboard/transactions${queryString(filters, { page: next })}" rel="next">Next page →</a>`}
</nav>`,
  };
}

const CSV_HEADER = [
  'created_at', 'transaction_id', 'agent_id', 'agent_name', 'type', 'status', 'amount_usd', 'chain_id', 'recipient_address', 'service_slug', 'approval_request_id', 'reason',
  'chain_status', 'tx_hash', 'block_number', 'network_fee_wei',
];

/** Writes the CSV page by page, waiting for the socket when it is full. */
async function writeCsv(ctx: RouteContext, query: ListTransactionsInput, showPings: boolean, res: NodeResponse): Promise<void> {
  const names = new Map((await listAgents(ctx.deps, ctx.principal, ctx.principal.orgId)).map((a) => [a.id, a.name]));
  // Both response types have these two members; their union is not callable as declared.
  const out = res as unknown as { write(chunk: string): boolean; once(event: 'drain' | 'close', f: () => void): unknown };
  const write = (chunk: string) => new Promise<void>((resolve) => {
    if (out.write(chunk)) return resolve();
    out.once('drain', resolve);
    out.once('close', resolve);
  });
  await write(csvRow(CSV_HEADER));
  let token = '';
  let written = 0;
  do {
    const page = await listTransactions(ctx.deps, ctx.principal, { ...query, pageSize: 500, pageToken: token });
    let chunk = '';
    for (const t of page.transactions) {
      if (!showPings && isPing(t)) continue;
      written++;
      chunk += csvRow([
        { safe: iso(t.createdAt) }, t.id, t.agentId, names.get(t.agentId) ?? '', t.type, t.status, { safe: formatUsd(t.amountMicros) },
        { safe: String(t.chainId) }, t.recipient, t.serviceSlug, t.approvalId ?? '', t.reason,
        t.chain?.status ?? '', t.chain?.txHash ?? '', { safe: t.chain?.blockNumber == null ? '' : String(t.chain.blockNumber) }, { safe: t.chain?.networkFeeWei ?? '' },
      ]);
    }
    await write(chunk);
    token = page.nextPageToken;
  } while (token !== '' && written < MAX_EXPORT_ROWS && !res.destroyed);
  res.end();
}

/** The ledger with filters and paging, and its CSV export. */
export const transactionRoutes: Route[] = [
  { method: 'GET', path: '/dashboard/transactions', permission: 'read', handle: transactionsPage },
  {
    method: 'GET',
    path: '/dashboard/transactions.csv',
    permission: 'read',
    async handle(ctx): Promise<Reply> {
      let query: ListTransactionsInput;
      const filters = readFilters(ctx.url);
      try {
        query = toQuery(ctx.principal.orgId, filters);
        // Checks the filters (and the organization) before the 200 header commits to a CSV.
        await listTransactions(ctx.deps, ctx.principal, { ...query, pageSize: 1 });
      } catch (err) {
        if (err instanceof FilterError) return { type: 'json', status: 400, body: { error: err.message } };
        throw err;
      }
      const stamp = iso(ctx.deps.now()).slice(0, 16).replace(/[-:]/g, '').replace('T', '-');
      return {
        type: 'stream',
        headers: {
          'content-type': 'text/csv; charset=utf-8',
          'content-disposition': `attachment; filename="paypolicy-transactions-${stamp}.csv"`,
          'cache-control': 'no-store',
        },
        write: (res) => writeCsv(ctx, query, filters.pings === '1', res),
      };
    },
  },
];
