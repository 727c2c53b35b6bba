import { listAgents } from '../../app/organizations/agents.js';
import { decideApproval, describeApproval, listApprovals, type ApprovalView } from '../../app/approvals/approvals.js';
import { roleAllows } from '../../app/dashboardRoles.js';
import type { AppDeps } from '../../app/deps.js';
import { visibleServices } from '../../app/registry/registry.js';
import type { SessionContext } from '../../app/accounts/dashboardSessions.js';
import type { DashboardUserPrincipal } from '../../domain/types.js';
import { checksum, duration, iso, shortAddress, usd, utc, wei } from '../format.js';
import { html, type Html } from '../html.js';
import { csrfField, tableWrap } from '../layout.js';
import { errorText, type Route, type RouteContext } from '../routes.js';

/** Names to show instead of ids: agents of the organization and registry services by slug. */
type Names = { agents: Map<string, string>; services: Map<string, string> };

async function loadNames(deps: AppDeps, principal: DashboardUserPrincipal): Promise<Names> {
  return {
    agents: new Map((await listAgents(deps, principal, principal.orgId)).map((a) => [a.id, a.name])),
    services: new Map((await visibleServices(deps, principal, principal.orgId)).map((s) => [s.slug, s.name])),
  };
}

function serviceCell(v: ApprovalView, names: Names) {
  if (v.serviceSlug === '') return html`<span class="muted">not a registered service</span>`;
  const name = names.services.get(v.serviceSlug);
  return name === undefined ? html`<code>${v.serviceSlug}</code>` : html`${name} <span class="muted small">(${v.serviceSlug})</span>`;
}

/** The most the payment can cost in network fees on top of its amount, and who pays them. */
function networkFeeCell(v: ApprovalView) {
  if (v.maxNetworkFeeWei !== null) return html`${wei(v.maxNetworkFeeWei)} <span class="muted small">paid by the treasury on top of the amount</span>`;
  if (v.maxTempoFeeMicros !== null) return html`at most ${usd(v.maxTempoFeeMicros)} <span class="muted small">Tempo fee, paid in the stablecoin on top of the amount</span>`;
  return html`none <span class="muted small">the payee or its facilitator pays the gas</span>`;
}

/**
 * Who is paid how much. A split payment lists every transfer, the recipient's share first: the
 * approver approves these amounts to these addresses, and a paywall that splits differently
 * when the payment is collected is refused.
 */
function payeesCell(v: ApprovalView) {
  if (v.payees.length <= 1) return html`<span class="mono">${checksum(v.recipient)}</span>`;
  return html`<ul class="payees">${v.payees.map((p, i) => html`<li><span class="mono">${checksum(p.recipient)}</span> receives <strong>${usd(p.amountMicros)}</strong>${i > 0 ? html` <span class="muted small">(split)</span>` : ''}</li>`)}</ul>`;
}

/** The payees in a line of text, for the decision's confirmation. */
function payeesText(v: ApprovalView): string {
  if (v.payees.length <= 1) return `${usd(v.amountMicros)} to ${checksum(v.recipient)}`;
  return `${usd(v.amountMicros)} split as ${v.payees.map((p) => `${usd(p.amountMicros)} to ${checksum(p.recipient)}`).join(', ')}`;
}

/** One pending request as a card; also sent as HTML inside approvals.json for live insertion. */
export function approvalCard(session: SessionContext, now: number, v: ApprovalView, names: Names): Html {
  const agent = names.agents.get(v.agentId) ?? v.agentId;
  const titleId = `approval-${v.id}`;
  const decide = roleAllows(session.user.role, 'decide')
    // Enter in the note "clicks" the form's first submit button (implicit submission). That button
    // is this disabled, hidden one, so Enter does nothing: only Approve or Deny decides. No script.
    ? html`<form class="decide" method="post" action="/dashboard/approvals/${v.id}/decide">
<button type="submit" class="implicit-submit" disabled hidden aria-hidden="true" tabindex="-1"></button>
${csrfField({ session })}
<label for="note-${v.id}">Note <span class="hint">(optional, kept with the decision)</span></label>
<input type="text" id="note-${v.id}" name="note" maxlength="1000" autocomplete="off">
<div class="buttons">
<button type="submit" class="approve" name="decision" value="approve">Approve<span class="sr-only"> ${usd(v.amountMicros)} for ${agent}</span></button>
<button type="submit" class="danger" name="decision" value="deny">Deny<span class="sr-only"> ${usd(v.amountMicros)} for ${agent}</span></button>
</div>
</form>`
    : html`<p class="muted small">Your role (${session.user.role}) can view approval requests but not decide them.</p>`;
  return html`<article class="approval" data-approval-id="${v.id}" aria-labelledby="${titleId}">
<div>
<div class="amount" id="${titleId}">${usd(v.amountMicros)} <span class="muted small">requested by ${agent}${v.payees.length > 1 ? `, split between ${v.payees.length} recipients` : ''}</span></div>
<dl>
<dt>Agent</dt><dd><a href="/dashboard/agents/${v.agentId}">${agent}</a></dd>
<dt>${v.payees.length > 1 ? 'Recipients' : 'Recipient'}</dt><dd>${payeesCell(v)}</dd>
<dt>Service</dt><dd>${serviceCell(v, names)}</dd>
<dt>Max network fee</dt><dd>${networkFeeCell(v)}</dd>
<dt>Why</dt><dd>${v.reason}</dd>
<dt>Requested</dt><dd>${utc(v.createdAt)}</dd>
<dt>Expires</dt><dd><time class="countdown" datetime="${iso(v.expiresAt)}" data-expires-at="${v.expiresAt}">expires in ${duration(v.expiresAt - now)}</time> <span class="muted small">at ${utc(v.expiresAt)}</span></dd>
</dl>
</div>
${decide}
</article>`;
}

const STATUS_BADGE = { approved: 'badge-ok', denied: 'badge-bad', expired: 'badge-muted', pending: 'badge-warn' } as const;

/**
 * An address in the decisions table: shortened in the table (the full one in its title), in full
 * on a phone's card, where it has a line of its own and nothing to hover. Exactly one of the two
 * is displayed, so a screen reader reads it once.
 */
function decidedAddress(address: string): Html {
  return html`<span class="mono addr-full">${checksum(address)}</span><span class="mono addr-short" title="${checksum(address)}">${shortAddress(address)}</span>`;
}

function decidedTable(decided: ApprovalView[], names: Names): Html {
  if (decided.length === 0) return html`<p class="empty">No decisions yet.</p>`;
  // Classes d-* place each cell in the phone layout (static/styles.ts, .decided).
  const rows = decided.map((v) => html`<tr>
<td class="d-outcome"><span class="badge ${STATUS_BADGE[v.status]}">${v.status}</span></td>
<td class="d-agent nowrap">${names.agents.get(v.agentId) ?? v.agentId}</td>
<td class="d-amount num">${usd(v.amountMicros)}</td>
<td class="d-recipient nowrap">${v.payees.length <= 1
    ? decidedAddress(v.recipient)
    : v.payees.map((p) => html`<div>${decidedAddress(p.recipient)} ${usd(p.amountMicros)}</div>`)}</td>
<td class="d-by"><span class="card-label">Decided by </span>${v.status === 'expired' ? html`<span class="muted">nobody (expired)</span>` : v.decidedBy}</td>
<td class="d-when nowrap"><time datetime="${iso(decidedAt(v))}">${utc(decidedAt(v))}</time></td>
<td class="d-note wrap">${v.note !== '' && html`<span class="card-label">Note: </span>`}${v.note}</td>
</tr>`);
  return tableWrap('Recently decided', html`<table class="decided">
<caption class="sr-only">Recently decided approval requests, latest decision first</caption>
<thead><tr><th scope="col">Outcome</th><th scope="col">Agent</th><th scope="col" class="num">Amount</th><th scope="col">Recipient</th><th scope="col">Decided by</th><th scope="col">When</th><th scope="col">Note</th></tr></thead>
<tbody>${rows}</tbody></table>`, 'decided-wrap');
}

/** When a request stopped waiting: its decision, or its expiry when nobody decided. */
function decidedAt(v: ApprovalView): number {
  return v.decidedAt ?? v.expiresAt;
}

async function approvalsPage(ctx: RouteContext) {
  const { deps, session } = ctx;
  const all = await Promise.all((await listApprovals(deps, ctx.principal, ctx.principal.orgId, '')).map((a) => describeApproval(deps, a)));
  const names = await loadNames(deps, ctx.principal);
  const now = deps.now();
  const pending = all.filter((a) => a.status === 'pending');
  // Latest decision first: a request asked for long ago may have been decided a minute ago.
  const decided = all.filter((a) => a.status !== 'pending').sort((a, b) => decidedAt(b) - decidedAt(a)).slice(0, 50);
  return {
    type: 'page' as const,
    section: 'approvals' as const,
    title: 'Approvals',
    content: html`<div class="page-head"><h1>Approvals</h1>
<p class="muted">Payments above an agent's approval threshold wait here for a person. New requests appear without reloading.</p></div>
<h2 id="pending-heading">Waiting for a decision</h2>
<p class="sr-only" aria-live="polite" data-live-status></p>
<div class="approvals" data-live-approvals aria-labelledby="pending-heading">${pending.map((v) => approvalCard(session, now, v, names))}</div>
<p class="empty" data-approvals-empty ${pending.length > 0 ? html`hidden` : ''}>No payments are waiting for a decision.</p>
<h2>Recently decided</h2>
${decidedTable(decided, names)}`,
  };
}

/** The approvals page (the home page while anything is pending), its live JSON and the decision form. */
export const approvalRoutes: Route[] = [
  { method: 'GET', path: '/dashboard/approvals', permission: 'read', handle: approvalsPage },
  {
    method: 'GET',
    path: '/dashboard/approvals.json',
    permission: 'read',
    async handle(ctx) {
      const { deps, session } = ctx;
      const pending = await Promise.all((await listApprovals(deps, ctx.principal, ctx.principal.orgId, 'pending')).map((a) => describeApproval(deps, a)));
      const names = await loadNames(deps, ctx.principal);
      const now = deps.now();
      return {
        type: 'json',
        body: { pendingCount: pending.length, pending: pending.map((v) => ({ id: v.id, html: approvalCard(session, now, v, names).value })) },
      };
    },
  },
  {
    method: 'POST',
    path: '/dashboard/approvals/{id}/decide',
    permission: 'decide',
    body: 'form',
    fields: ['decision', 'note'],
    async handle(ctx) {
      const { deps, form } = ctx;
      // The decision is the value of the button pressed, given exactly once. Anything else (no
      // value, an empty one, or two) decides nothing, whatever else the form carries.
      const choices = form.getAll('decision');
      if (choices.length !== 1 || (choices[0] !== 'approve' && choices[0] !== 'deny')) {
        return { type: 'redirect', to: '/dashboard/approvals', flash: { kind: 'error', text: 'Nothing was decided: press Approve or Deny.' } };
      }
      const decision = choices[0];
      try {
        const a = await describeApproval(deps, await decideApproval(deps, ctx.principal, { id: ctx.params.id!, decision, note: form.get('note') }));
        const text = a.status === 'approved'
          ? `Approved ${payeesText(a)}; the agent collects the signature by repeating its request.`
          : `Denied ${payeesText(a)}.`;
        return { type: 'redirect', to: '/dashboard/approvals', flash: { kind: 'ok', text } };
      } catch (err) {
        const e = errorText(err);
        if (e.kind === 'internal' || e.kind === 'treasury_unavailable') throw err;
        return { type: 'redirect', to: '/dashboard/approvals', flash: { kind: 'error', text: e.text } };
      }
    },
  },
];
