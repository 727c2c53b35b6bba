import { summarizeSpend, type AgentSpend } from '../../app/payments/spend.js';
import { getTreasuryBalances } from '../../app/organizations/treasury.js';
import { capBar, capLegend, cumulativeChart, dailyChart } from '../charts.js';
import { usd } from '../format.js';
import { html } from '../html.js';
import type { Route } from '../routes.js';
import { treasuryPanel } from './treasury.js';

function agentBlock(s: AgentSpend) {
  const { agent } = s;
  const cap = agent.policy.spendCapMicros;
  const used = `${usd(s.last24hMicros)} of ${usd(cap)} cap in the last 24 hours`;
  return html`<section class="spend-agent" id="agent-${agent.id}" aria-labelledby="spend-${agent.id}">
<div>
<h3 id="spend-${agent.id}"><a href="/dashboard/agents/${agent.id}">${agent.name}</a>${agent.status !== 'active' ? html` <span class="badge badge-muted">${agent.status}</span>` : ''}</h3>
<p class="small"><strong>${usd(s.last24hMicros)}</strong> of ${usd(cap)} · last 24 h</p>
${capBar(s.last24hMicros, cap, used)}
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
</section>`;
}

/** The organization's week across its whole panel: wide on a laptop, narrow on a phone (styles.ts picks one). */
function orgChart(daily: readonly bigint[]) {
  const label = `Organization spend per day over 7 days: ${daily.map(usd).join(', ')}`;
  return html`<div class="chart-wide">${dailyChart(daily, 0n, label, { width: 960, height: 200 })}</div>
<div class="chart-narrow">${dailyChart(daily, 0n, label)}</div>`;
}

/** Spend per agent and for the organization, drawn as SVG. */
export const spendRoutes: Route[] = [
  {
    method: 'GET',
    path: '/dashboard/spend',
    permission: 'read',
    async handle(ctx) {
      const summary = await summarizeSpend(ctx.deps, ctx.principal, ctx.principal.orgId);
      // Read from the nodes while the page renders; a node that is down costs its RPC timeout at most.
      const balances = await getTreasuryBalances(ctx.deps, ctx.principal, ctx.principal.orgId);
      const { totals } = summary;
      const shown = summary.agents.filter((a) => a.agent.status !== 'revoked' || a.last7dMicros > 0n);
      return {
        type: 'page',
        section: 'spend',
        title: 'Spend',
        content: html`<div class="page-head"><h1>Spend</h1>
<p class="muted">Signed payments, payments being signed and pending approvals, counted the way each agent's cap counts them.</p></div>
<div class="stats">
<div class="stat"><div class="label">Organization, last 24 hours</div><div class="value">${usd(totals.last24hMicros)}</div></div>
<div class="stat"><div class="label">Organization, last 7 days</div><div class="value">${usd(totals.last7dMicros)}</div></div>
<div class="stat"><div class="label">Sum of caps of live agents</div><div class="value">${usd(totals.capMicros)}<span class="small muted"> / 24 h</span></div></div>
</div>
${treasuryPanel(balances)}
<section class="panel" aria-labelledby="org-daily"><h2 id="org-daily">Organization per day</h2>
<figure class="org-chart">${orgChart(totals.daily)}</figure></section>
<section class="panel" aria-labelledby="per-agent"><h2 id="per-agent">Per agent</h2>
${shown.length === 0 ? html`<p class="empty">No agents yet.</p>` : shown.map(agentBlock)}</section>`,
      };
    },
  },
];
