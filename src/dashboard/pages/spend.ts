import { formatEther } from 'viem';
import { roleAllows } from '../../app/dashboardRoles.js';
import type { LimitStatus } from '../../app/payments/agentSpend.js';
import { summarizeSpend, type AgentSpend } from '../../app/payments/spend.js';
import { getOrganization, updateOrganization } from '../../app/organizations/organizations.js';
import { getTreasuryBalances } from '../../app/organizations/treasury.js';
import { invalidArgument } from '../../domain/errors.js';
import { describeWindow, type SpendLimit } from '../../domain/limits.js';
import { formatUsd } from '../../domain/money.js';
import { capLegend, cumulativeChart, dailyChart, usageMeter, type MeterValues } from '../charts.js';
import { usd } from '../format.js';
import { html, type Html } from '../html.js';
import { csrfField, errorSummary } from '../layout.js';
import {
  ADD_ROW, LIMIT_FIELDS, LIMIT_REPEATABLE, LIMIT_ROWS_HELP, hasLimitErrors, limitErrorLinks, limitRowErrors, limitRowsFieldset,
  limitRowsFromForm, limitsOfRows, limitsTable, rowsOfLimits, withBlankRow, type LimitRowErrors, type LimitRows,
} from '../limitRows.js';
import type { Reply, Route, RouteContext } from '../routes.js';
import { treasuryPanel } from './treasury.js';

/** A meter's values for `used` of `max`: amber from three quarters, red from 95%. */
function meterValues(used: bigint, max: bigint, text: (v: bigint) => string): MeterValues {
  return { used: text(used), max: text(max), low: text((max * 3n) / 4n), high: text((max * 95n) / 100n) };
}

/** What a limit bounds, in words: whose, over which window, for which recipient. */
function limitTitle(s: LimitStatus, i: number): string {
  const whose = i === 0 ? 'Spend cap' : s.scope === 'agent' ? "Agent's limit" : "Organization's limit";
  return `${whose}, ${describeWindow(s.limit)}${s.limit.recipient === null ? '' : `, payments to ${s.limit.recipient}`}`;
}

/**
 * Every limit of an agent (its spend read: the cap, its own, the organization's) as a meter per
 * bound it sets, each beside text that states the numbers; the meter takes its name from both.
 */
function limitMeters(s: AgentSpend): Html {
  const items = s.limits.map((l, i) => {
    const id = `limit-use-${s.agent.id}-${i}`;
    const line = (kind: string, values: MeterValues, text: string) => html`<div class="meter-line">${usageMeter(`${id}-${kind}`, values, `${id} ${id}-${kind}-text`)}<span id="${id}-${kind}-text">${text}</span></div>`;
    const left = (max: bigint, used: bigint) => (max > used ? max - used : 0n);
    const { maxMicros, maxCount, maxNetworkFeeWei } = l.limit;
    return html`<li><p class="limit-title" id="${id}">${limitTitle(l, i)}</p>
${maxMicros !== null && line('usd', meterValues(l.micros, maxMicros, formatUsd), `${usd(l.micros)} of ${usd(maxMicros)} · ${usd(left(maxMicros, l.micros))} left`)}
${maxCount !== null && line('count', meterValues(BigInt(l.count), BigInt(maxCount), String), `${l.count} of ${maxCount} payments · ${left(BigInt(maxCount), BigInt(l.count))} left`)}
${maxNetworkFeeWei !== null && line('fee', meterValues(l.feeWei, maxNetworkFeeWei, formatEther), `${formatEther(l.feeWei)} of ${formatEther(maxNetworkFeeWei)} ETH of network fees`)}
</li>`;
  });
  return html`<ul class="limit-use" aria-label="Limits of ${s.agent.name}">${items}</ul>`;
}

function agentBlock(s: AgentSpend) {
  const { agent } = s;
  const cap = agent.policy.spendCapMicros;
  const used = `${usd(s.last24hMicros)} of ${usd(cap)} cap in the last 24 hours`;
  return html`<section class="spend-agent" id="agent-${agent.id}" aria-labelledby="spend-${agent.id}">
<div>
<h3 id="spend-${agent.id}"><a href="/dashboard/agents/${agent.id}">${agent.name}</a>${agent.status !== 'active' ? html` <span class="badge badge-muted">${agent.status}</span>` : ''}</h3>
<p class="small"><strong>${usd(s.last24hMicros)}</strong> of ${usd(cap)} · last 24 h</p>
<p class="small muted">${usd(s.last7dMicros)} in 7 days</p>
</div>
<figure>
<figcaption class="chart-caption">Running total over the last 24 hours${cap > 0n && capLegend(`cap ${usd(cap)}`)}</figcaption>
${cumulativeChart(s.hourly, cap, `${agent.name}: ${used}`)}
</figure>
<figure>
<figcaption class="chart-caption">Per day, last 7 days${cap > 0n && capLegend(`cap ${usd(cap)} / 24 h`)}</figcaption>
${dailyChart(s.daily, cap, `${agent.name}: ${usd(s.last7dMicros)} over 7 days; daily amounts ${s.daily.map(usd).join(', ')}`)}
</figure>
${limitMeters(s)}
</section>`;
}

/** The organization's week across its whole panel: wide on a laptop, narrow on a phone (styles.ts picks one). */
function orgChart(daily: readonly bigint[]) {
  const label = `Organization spend per day over 7 days: ${daily.map(usd).join(', ')}`;
  return html`<div class="chart-wide">${dailyChart(daily, 0n, label, { width: 960, height: 200 })}</div>
<div class="chart-narrow">${dailyChart(daily, 0n, label)}</div>`;
}

/** The organization's window limits: an editor for owners, a table for everyone else. */
function orgLimitsPanel(ctx: RouteContext, limits: readonly SpendLimit[], edit: { rows: LimitRows; errors: LimitRowErrors } | undefined): Html {
  const body = roleAllows(ctx.session.user.role, 'manage')
    ? html`${edit && errorSummary(limitErrorLinks('org-limit', edit.rows, edit.errors))}
<form method="post" action="/dashboard/organization/limits" novalidate>${csrfField(ctx)}
<button type="submit" class="implicit-submit" hidden aria-hidden="true" tabindex="-1">Save</button>
${limitRowsFieldset('org-limit', edit?.rows ?? rowsOfLimits(limits), edit?.errors ?? { fields: new Map() })}
<button type="submit" class="primary">Save organization limits</button>
</form>`
    : limits.length === 0 ? html`<p>The organization has no window limits.</p>` : limitsTable('Organization limits', limits.map((l) => [undefined, l] as const));
  return html`<section class="panel" id="org-limits" aria-labelledby="org-limits-heading"><h2 id="org-limits-heading">Organization limits</h2>
<p class="small muted">Rolling budgets every agent of the organization shares, checked after each agent's own: a payment any agent asks for counts against them.${roleAllows(ctx.session.user.role, 'manage') && ` ${LIMIT_ROWS_HELP}`}</p>
${body}</section>`;
}

/** The Spend page; `orgEdit` is the organization's limits form as posted, with its errors. */
async function spendPage(ctx: RouteContext, orgEdit?: { rows: LimitRows; errors: LimitRowErrors }): Promise<Reply> {
  const summary = await summarizeSpend(ctx.deps, ctx.principal, ctx.principal.orgId);
  // Read from the nodes while the page renders; a node that is down costs its RPC timeout at most.
  const balances = await getTreasuryBalances(ctx.deps, ctx.principal, ctx.principal.orgId);
  const org = await getOrganization(ctx.deps, ctx.principal, ctx.principal.orgId);
  const { totals } = summary;
  const shown = summary.agents.filter((a) => a.agent.status !== 'revoked' || a.last7dMicros > 0n);
  return {
    type: 'page',
    status: orgEdit && hasLimitErrors(orgEdit.errors) ? 400 : 200,
    section: 'spend',
    title: 'Spend',
    content: html`<div class="page-head"><h1>Spend</h1>
<p class="muted">Signed payments, payments being signed and pending approvals, counted the way each agent's cap and limits count them.</p></div>
<div class="stats">
<div class="stat"><div class="label">Organization, last 24 hours</div><div class="value">${usd(totals.last24hMicros)}</div></div>
<div class="stat"><div class="label">Organization, last 7 days</div><div class="value">${usd(totals.last7dMicros)}</div></div>
<div class="stat"><div class="label">Sum of caps of live agents</div><div class="value">${usd(totals.capMicros)}<span class="small muted"> / 24 h</span></div></div>
</div>
${treasuryPanel(balances)}
<section class="panel" aria-labelledby="org-daily"><h2 id="org-daily">Organization per day</h2>
<figure class="org-chart">${orgChart(totals.daily)}</figure></section>
<section class="panel" aria-labelledby="per-agent"><h2 id="per-agent">Per agent</h2>
${shown.length === 0 ? html`<p class="empty">No agents yet.</p>` : shown.map(agentBlock)}</section>
${orgLimitsPanel(ctx, org.limits, orgEdit)}`,
  };
}

/** Spend per agent and for the organization, drawn as SVG, each limit as a meter; the organization's limits. */
export const spendRoutes: Route[] = [
  { method: 'GET', path: '/dashboard/spend', permission: 'read', handle: (ctx) => spendPage(ctx) },
  {
    method: 'POST',
    path: '/dashboard/organization/limits',
    permission: 'manage',
    body: 'form',
    fields: LIMIT_FIELDS,
    repeatable: LIMIT_REPEATABLE,
    async handle(ctx) {
      const rows = limitRowsFromForm(ctx.form);
      // Saving no rows would remove every limit: only a form that carries its rows may do that.
      if (rows === undefined) throw invalidArgument('The form carried no limit rows: nothing was changed.');
      if (ctx.form.has(ADD_ROW)) return spendPage(ctx, { rows: withBlankRow(rows), errors: { fields: new Map() } });
      const errors = limitRowErrors(rows);
      if (hasLimitErrors(errors)) return spendPage(ctx, { rows, errors });
      await updateOrganization(ctx.deps, ctx.principal, { orgId: ctx.principal.orgId, limits: limitsOfRows(rows) });
      return { type: 'redirect', to: '/dashboard/spend#org-limits', flash: { kind: 'ok', text: 'Organization limits saved.' } };
    },
  },
];
