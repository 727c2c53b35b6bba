import { createAgent, getAgent, listAgents, parsePolicy, recentPolicyChanges, setPolicy, updateAgent, type PolicyVersionChanges } from '../../app/organizations/agents.js';
import { roleAllows } from '../../app/dashboardRoles.js';
import type { SessionContext } from '../../app/accounts/dashboardSessions.js';
import { parseUsd, formatUsd } from '../../domain/money.js';
import type { SpendLimit } from '../../domain/limits.js';
import type { PolicyChange } from '../../domain/policyChanges.js';
import type { Agent } from '../../domain/types.js';
import { getOrganization } from '../../app/organizations/organizations.js';
import { DEFAULT_SIMULATION_DAYS, simulatePolicyChange, type SimulationReport } from '../../app/payments/policySimulation.js';
import type { Outcome } from '../../domain/simulation.js';
import { maxNetworkFeeFromEth, maxNetworkFeeMessage, weiToEthText } from '../ether.js';
import { duration, usd, utc, wei } from '../format.js';
import {
  ADD_ROW, LIMIT_FIELDS, LIMIT_REPEATABLE, LIMIT_ROWS_HELP, hasLimitErrors, limitErrorLinks, limitRowErrors, limitRowsFieldset,
  limitRowsFromForm, limitsOfRows, limitsTable, rowsOfLimits, withBlankRow, type LimitRowErrors, type LimitRows,
} from '../limitRows.js';
import { html, type Html, type Renderable } from '../html.js';
import { csrfField, errorSummary, fieldError, invalidAttrs, tableWrap } from '../layout.js';
import { errorText, validationMessage, type Reply, type Route, type RouteContext } from '../routes.js';

/** An agent that pinged this recently counts as connected. */
const CONNECTED_MS = 5 * 60_000;

const STATUS_BADGE = { active: 'badge-ok', paused: 'badge-warn', revoked: 'badge-bad' } as const;

function statusBadge(a: Agent): Html {
  return html`<span class="badge ${STATUS_BADGE[a.status]}">${a.status}</span>`;
}

function connection(a: Agent, now: number): Html {
  if (a.lastPingAt === null) return html`<span class="muted">never pinged</span>`;
  const ago = now - a.lastPingAt;
  if (ago <= CONNECTED_MS) return html`<span class="badge badge-ok">connected</span> <span class="muted small">${duration(ago)} ago</span>`;
  return html`<span class="muted">last ping ${duration(ago)} ago</span>`;
}

/** Pause/resume and revoke buttons for owners; revocation asks first because it is final. */
function statusActions(session: SessionContext, a: Agent, from: 'list' | 'agent'): Renderable {
  if (!roleAllows(session.user.role, 'manage') || a.status === 'revoked') return '';
  const action = `/dashboard/agents/${a.id}/status`;
  const back = from === 'list' ? html`<input type="hidden" name="back" value="list">` : '';
  const toggle = a.status === 'active'
    ? html`<button type="submit" name="status" value="paused">Pause<span class="sr-only"> ${a.name}</span></button>`
    : html`<button type="submit" name="status" value="active">Resume<span class="sr-only"> ${a.name}</span></button>`;
  return html`<form method="post" action="${action}">${csrfField({ session })}${back}${toggle}</form>
<form method="post" action="${action}" data-confirm="Revoke agent ${a.name}? A revoked agent can never sign again.">${csrfField({ session })}${back}<input type="hidden" name="status" value="revoked"><button type="submit" class="danger">Revoke<span class="sr-only"> ${a.name}</span></button></form>`;
}

async function agentsPage(ctx: RouteContext, createError?: { name: string; message: string }): Promise<Reply> {
  const { deps, session } = ctx;
  const now = deps.now();
  const agents = await listAgents(deps, ctx.principal, ctx.principal.orgId);
  const rows = agents.map((a) => html`<tr>
<td><a href="/dashboard/agents/${a.id}">${a.name}</a><div class="mono small muted">${a.id}</div></td>
<td>${statusBadge(a)}</td>
<td>${connection(a, now)}</td>
<td class="num">${usd(a.policy.spendCapMicros)}</td>
<td class="num">${usd(a.policy.approvalThresholdMicros)}</td>
<td>${a.policy.allowlist.length === 0 ? html`<span class="muted">nothing allowed</span>` : `${a.policy.allowlist.length} ${a.policy.allowlist.length === 1 ? 'entry' : 'entries'}`}</td>
<td class="actions">${statusActions(session, a, 'list')}</td>
</tr>`);
  const create = roleAllows(session.user.role, 'manage')
    ? html`<section class="panel" aria-labelledby="new-agent"><h2 id="new-agent">Add an agent</h2>
${errorSummary([['agent-name', createError?.message]])}
<form class="inline-form" method="post" action="/dashboard/agents">${csrfField({ session })}
<div class="field"><label for="agent-name">Name</label>
<input type="text" id="agent-name" name="name" required maxlength="200" value="${createError?.name ?? ''}" ${invalidAttrs('agent-name', createError?.message)}>
${fieldError('agent-name', createError?.message)}</div>
<button type="submit" class="primary">Add agent</button>
</form>
<p class="small muted">A new agent's policy allows nothing until you set one.</p></section>`
    : '';
  return {
    type: 'page',
    status: createError ? 400 : 200,
    section: 'agents',
    title: 'Agents',
    content: html`<div class="page-head"><h1>Agents</h1><p class="muted">Software that asks for payments with your API keys. Connected means it pinged in the last 5 minutes.</p></div>
${create}
${agents.length === 0 ? html`<p class="empty">No agents yet.</p>` : tableWrap('Agents', html`<table>
<caption class="sr-only">Agents</caption>
<thead><tr><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Connection</th><th scope="col" class="num">Cap / 24 h</th><th scope="col" class="num">Approval above</th><th scope="col">Allowlist</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${rows}</tbody></table>`)}`,
  };
}

/**
 * `fee` is the ceiling in ETH as typed; undefined when the form did not carry the field (the
 * ceiling then stays as it is). `limits`: the window limits' rows; undefined when the form carried
 * none (the limits stay as they are).
 */
type PolicyValues = { allowlist: string; cap: string; threshold: string; fee: string | undefined; perPayment: string | undefined; limits: LimitRows | undefined };
type PolicyErrors = { allowlist?: string; cap?: string; threshold?: string; fee?: string; perPayment?: string; limits?: LimitRowErrors };

function allowlistLines(text: string): string[] {
  return text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '');
}

/** The policy form's labels: messages name the fields as the person sees them, not as the API does. */
const POLICY_LABELS = { allowlist: 'Allowed recipients', cap: 'Spend cap', threshold: 'Approval above', fee: 'Max network fee', perPayment: 'Max per payment' } as const;

/**
 * Checks each field with the same functions setPolicy uses (parsePolicy with neutral amounts for
 * the allowlist, parseUsd for the amounts, parseMaxNetworkFeeWei for the ceiling once converted
 * from ETH), so every wrong field gets its message at once.
 */
function policyErrors(v: PolicyValues): PolicyErrors {
  const allowlist = validationMessage(() => parsePolicy({ allowlist: allowlistLines(v.allowlist), spendCapUsd: '0', approvalThresholdUsd: '0' }, 0));
  return {
    // parsePolicy says `allowlist entry "x" is …` or `allowlist must …`.
    allowlist: allowlist?.replace(/^allowlist entry /, `${POLICY_LABELS.allowlist}: `).replace(/^allowlist /, `${POLICY_LABELS.allowlist} `),
    cap: validationMessage(() => parseUsd(v.cap, POLICY_LABELS.cap)),
    threshold: validationMessage(() => parseUsd(v.threshold, POLICY_LABELS.threshold)),
    fee: v.fee === undefined ? undefined : maxNetworkFeeMessage(v.fee, POLICY_LABELS.fee),
    perPayment: v.perPayment === undefined || v.perPayment === '' ? undefined : validationMessage(() => parseUsd(v.perPayment!, POLICY_LABELS.perPayment)),
    limits: v.limits === undefined ? undefined : limitRowErrors(v.limits),
  };
}

function hasPolicyErrors(e: PolicyErrors): boolean {
  return Boolean(e.allowlist || e.cap || e.threshold || e.fee || e.perPayment) || (e.limits !== undefined && hasLimitErrors(e.limits));
}

const NO_LIMIT_ERRORS: LimitRowErrors = { fields: new Map() };

function policyForm(session: SessionContext, a: Agent, values: PolicyValues, errors: PolicyErrors): Html {
  const rows = values.limits ?? rowsOfLimits(a.policy.limits);
  const limitErrors = errors.limits ?? NO_LIMIT_ERRORS;
  return html`${errorSummary([
    ['allowlist', errors.allowlist], ['spend-cap', errors.cap], ['threshold', errors.threshold], ['max-per-payment', errors.perPayment], ['max-fee', errors.fee],
    ...limitErrorLinks('limit', rows, limitErrors),
  ])}
<form method="post" action="/dashboard/agents/${a.id}/policy" novalidate>${csrfField({ session })}
<button type="submit" class="implicit-submit" hidden aria-hidden="true" tabindex="-1">Save</button>
<div class="field"><label for="allowlist">Allowed recipients <span class="hint">one 0x address or registry service slug per line; empty allows nothing</span></label>
<textarea id="allowlist" name="allowlist" rows="5" spellcheck="false" ${invalidAttrs('allowlist', errors.allowlist)}>${values.allowlist}</textarea>
${fieldError('allowlist', errors.allowlist)}</div>
<div class="form-grid">
<div class="field"><label for="spend-cap">Spend cap <span class="hint">USD per rolling 24 hours</span></label>
<input type="text" inputmode="decimal" id="spend-cap" name="spend_cap_usd" value="${values.cap}" ${invalidAttrs('spend-cap', errors.cap)}>
${fieldError('spend-cap', errors.cap)}</div>
<div class="field"><label for="threshold">Approval above <span class="hint">USD; larger payments wait for a person</span></label>
<input type="text" inputmode="decimal" id="threshold" name="approval_threshold_usd" value="${values.threshold}" ${invalidAttrs('threshold', errors.threshold)}>
${fieldError('threshold', errors.threshold)}</div>
<div class="field"><label for="max-per-payment">Max per payment <span class="hint">USD; larger payments are refused, never sent for approval; empty for no maximum</span></label>
<input type="text" inputmode="decimal" id="max-per-payment" name="max_per_payment_usd" value="${values.perPayment ?? ''}" ${invalidAttrs('max-per-payment', errors.perPayment)}>
${fieldError('max-per-payment', errors.perPayment)}</div>
<div class="field"><label for="max-fee">Max network fee <span class="hint">ETH per payment, such as 0.001: gas × max fee per gas of a raw transaction; 0 refuses raw transactions</span></label>
<input type="text" inputmode="decimal" id="max-fee" name="max_network_fee_eth" value="${values.fee ?? ''}" ${invalidAttrs('max-fee', errors.fee)}>
${fieldError('max-fee', errors.fee)}</div>
</div>
<fieldset class="limits-editor"><legend>Window limits of this agent</legend>
<p class="hint">Rolling budgets checked after the spend cap, each over its window and, with a recipient, only for payments to it. ${LIMIT_ROWS_HELP}</p>
${limitRowsFieldset('limit', rows, limitErrors)}
</fieldset>
<div class="actions"><button type="submit" class="primary">Save policy</button>
<button type="submit" name="${PREVIEW}" value="1">Preview on the last ${DEFAULT_SIMULATION_DAYS} days</button></div>
</form>`;
}

/** The policy form's second button: what the form's policy would have decided, nothing saved. */
const PREVIEW = 'preview';
/** Changed requests a preview lists; the CLI lists them all. */
const PREVIEW_SHOWN = 20;
const OUTCOME_TEXT: Record<Outcome, string> = { allowed: 'allowed', pending_approval: 'approval', denied: 'denied' };

function previewPanel(agentId: string, r: SimulationReport): Html {
  const changes = r.changed.slice(0, PREVIEW_SHOWN);
  const table = changes.length === 0 ? html`<p>No request's outcome would change.</p>` : tableWrap('Requests whose outcome would change', html`<table>
<thead><tr><th scope="col">When</th><th scope="col">Amount</th><th scope="col">Recipient</th><th scope="col">Was</th><th scope="col">Would be</th><th scope="col">Why</th></tr></thead>
<tbody>${changes.map((c) => html`<tr><td>${utc(c.at)}</td><td>${usd(c.amountMicros)}</td><td class="mono">${c.slug ?? c.recipient}</td>
<td>${OUTCOME_TEXT[c.had]}</td><td><strong>${OUTCOME_TEXT[c.wouldBe]}</strong></td><td>${c.reason || '—'}</td></tr>`)}</tbody></table>`);
  const more = r.changed.length > changes.length
    ? html`<p class="small muted">${r.changed.length - changes.length} more; all of them: <code>paypolicy policy simulate --agent ${agentId} --file POLICY.json --json</code>.</p>` : '';
  return html`<section class="panel" aria-labelledby="preview-heading" id="preview"><h2 id="preview-heading">Preview: the last ${r.days} days under this policy</h2>
<p role="status">Nothing is saved yet. Of ${r.requests} payment request${r.requests === 1 ? '' : 's'}, this policy would allow ${r.allowed}, send ${r.pendingApproval} for approval and deny ${r.denied}; ${r.changed.length} would change.</p>
${table}${more}</section>`;
}

/**
 * The window limits read-only: the organization's always (owners edit them on the Spend page), the
 * agent's too when the page has no policy form (`agentLimits`; null when they are in the form).
 */
function limitsPanel(agentLimits: readonly SpendLimit[] | null, orgLimits: readonly SpendLimit[]): Html {
  const rows = [...(agentLimits ?? []).map((l) => ['This agent', l] as const), ...orgLimits.map((l) => ['Organization', l] as const)];
  const none = agentLimits === null ? 'The organization has no window limits.' : 'No window limits: only the spend cap bounds what the agent commits over time.';
  return html`<section class="panel" aria-labelledby="limits-heading"><h2 id="limits-heading">${agentLimits === null ? "Organization's window limits" : 'Window limits'}</h2>
<p class="small muted">Rolling budgets checked after the spend cap; the organization's bind every agent together. Owners set the organization's on the <a href="/dashboard/spend#org-limits">Spend page</a>.</p>
${rows.length === 0 ? html`<p>${none}</p>` : limitsTable('Window limits', rows)}</section>`;
}

/** How many policy versions the agent page lists. */
const HISTORY_SHOWN = 20;

/** One change of a policy version in words. */
function changeText(c: PolicyChange): Html {
  const amount = (v: bigint | null) => (v === null ? 'no maximum' : usd(v));
  const limitText = (l: SpendLimit) => [
    l.window, l.maxMicros === null ? '' : usd(l.maxMicros), l.maxCount === null ? '' : `${l.maxCount} payments`,
    l.maxNetworkFeeWei === null ? '' : `${weiToEthText(l.maxNetworkFeeWei)} ETH of fees`, l.recipient === null ? '' : `to ${l.recipient}`,
  ].filter((x) => x !== '').join(', ');
  switch (c.field) {
    case 'allowlist':
      return html`${c.added.map((e) => html`<li>Allowed <code>${e}</code></li>`)}${c.removed.map((e) => html`<li>No longer allowed <code>${e}</code></li>`)}`;
    case 'spendCap':
    case 'approvalThreshold':
    case 'maxPerPayment':
      return html`<li>${{ spendCap: 'Spend cap', approvalThreshold: 'Approval above', maxPerPayment: 'Max per payment' }[c.field]}: ${amount(c.from)} → ${amount(c.to)}</li>`;
    case 'maxNetworkFee':
      return html`<li>Max network fee: ${weiToEthText(c.from)} ETH → ${weiToEthText(c.to)} ETH</li>`;
    case 'limits':
      return html`${c.added.map((l) => html`<li>Limit added: ${limitText(l)}</li>`)}${c.removed.map((l) => html`<li>Limit removed: ${limitText(l)}</li>`)}`;
  }
}

/** The policy's versions, newest first, each with who made it and what it changed. */
function historyPanel(agentId: string, history: { total: number; versions: PolicyVersionChanges[] }): Html {
  const items = history.versions.map((v) => html`<li><h3>Version ${v.version}</h3>
<p class="small muted">${utc(v.createdAt)} · ${v.actor === '' ? 'before versions were kept' : v.actor}</p>
${v.changes === null ? html`<p class="small">The first version kept.</p>` : v.changes.length === 0 ? html`<p class="small">Saved without a change.</p>` : html`<ul class="changes">${v.changes.map(changeText)}</ul>`}</li>`);
  const more = history.total > history.versions.length
    ? html`<p class="small muted">The latest ${history.versions.length} of ${history.total} versions; <code>paypolicy policy history --agent ${agentId}</code> lists every one.</p>`
    : '';
  return html`<section class="panel" aria-labelledby="history-heading"><h2 id="history-heading">Policy history</h2>
${more}<ol class="history">${items}</ol></section>`;
}

/**
 * One agent's page. `edit`: the policy form as posted, with its errors (status 400), or with no
 * errors when it asked for another limit row (200; nothing was saved).
 */
async function agentPage(ctx: RouteContext, a: Agent, edit?: { values: PolicyValues; errors: PolicyErrors; preview?: SimulationReport }): Promise<Reply> {
  const { session, deps } = ctx;
  const orgLimits = (await getOrganization(deps, ctx.principal, a.orgId)).limits;
  const history = await recentPolicyChanges(deps, ctx.principal, a.id, HISTORY_SHOWN);
  const values = edit?.values ?? {
    allowlist: a.policy.allowlist.join('\n'), cap: formatUsd(a.policy.spendCapMicros), threshold: formatUsd(a.policy.approvalThresholdMicros),
    fee: weiToEthText(a.policy.maxNetworkFeeWei),
    perPayment: a.policy.maxPerPaymentMicros === null ? '' : formatUsd(a.policy.maxPerPaymentMicros),
    limits: undefined,
  };
  const editable = roleAllows(session.user.role, 'manage') && a.status !== 'revoked';
  const policy = editable
    ? policyForm(session, a, values, edit?.errors ?? {})
    : html`<dl class="facts">
<dt>Allowed recipients</dt><dd>${a.policy.allowlist.length === 0 ? 'nothing' : a.policy.allowlist.map((e) => html`<code>${e}</code><br>`)}</dd>
<dt>Spend cap</dt><dd>${usd(a.policy.spendCapMicros)} per rolling 24 hours</dd>
<dt>Approval above</dt><dd>${usd(a.policy.approvalThresholdMicros)}</dd>
<dt>Max per payment</dt><dd>${a.policy.maxPerPaymentMicros === null ? 'no maximum' : usd(a.policy.maxPerPaymentMicros)}</dd>
<dt>Max network fee</dt><dd>${wei(a.policy.maxNetworkFeeWei)} per payment</dd></dl>`;
  return {
    type: 'page',
    status: edit && hasPolicyErrors(edit.errors) ? 400 : 200,
    section: 'agents',
    title: a.name,
    content: html`<p class="small"><a href="/dashboard/agents">← All agents</a></p>
<div class="page-head"><h1>${a.name} ${statusBadge(a)}</h1><div class="actions">${statusActions(session, a, 'agent')}</div></div>
<section class="panel"><dl class="facts">
<dt>Agent id</dt><dd class="mono">${a.id}</dd>
<dt>Connection</dt><dd>${connection(a, deps.now())}</dd>
<dt>Created</dt><dd>${utc(a.createdAt)}</dd>
<dt>Policy updated</dt><dd>${utc(a.policy.updatedAt)}</dd>
</dl>
<p class="small"><a href="/dashboard/transactions?agent=${a.id}">Transactions of this agent</a> · <a href="/dashboard/spend#agent-${a.id}">Spend</a></p></section>
<section class="panel" aria-labelledby="policy-heading"><h2 id="policy-heading">Policy</h2>
<p class="small muted">Checked in this order on every payment: agent status, maximum per payment, allowlist, network fee, spend cap, approval threshold.</p>
${policy}</section>
${edit?.preview ? previewPanel(a.id, edit.preview) : ''}
${limitsPanel(editable ? null : a.policy.limits, orgLimits)}
${historyPanel(a.id, history)}`,
  };
}

/** Agents: list, add, one agent's page, status changes and the policy form. */
export const agentRoutes: Route[] = [
  { method: 'GET', path: '/dashboard/agents', permission: 'read', handle: async (ctx) => agentsPage(ctx) },
  {
    method: 'POST',
    path: '/dashboard/agents',
    permission: 'manage',
    body: 'form',
    fields: ['name'],
    async handle(ctx) {
      const name = ctx.form.get('name');
      try {
        const agent = await createAgent(ctx.deps, ctx.principal, { orgId: ctx.principal.orgId, name });
        return { type: 'redirect', to: `/dashboard/agents/${agent.id}`, flash: { kind: 'ok', text: `Agent ${agent.name} added. Its policy allows nothing until you set one below.` } };
      } catch (err) {
        const e = errorText(err);
        if (e.kind !== 'invalid_argument') throw err;
        return agentsPage(ctx, { name, message: e.text });
      }
    },
  },
  {
    method: 'GET',
    path: '/dashboard/agents/{id}',
    permission: 'read',
    handle: async (ctx) => agentPage(ctx, await getAgent(ctx.deps, ctx.principal, ctx.params.id!)),
  },
  {
    method: 'POST',
    path: '/dashboard/agents/{id}/status',
    permission: 'manage',
    body: 'form',
    fields: ['status', 'back'],
    async handle(ctx) {
      const agent = await getAgent(ctx.deps, ctx.principal, ctx.params.id!);
      const back = ctx.form.get('back') === 'list' ? '/dashboard/agents' : `/dashboard/agents/${agent.id}`;
      try {
        const updated = await updateAgent(ctx.deps, ctx.principal, { agentId: agent.id, status: ctx.form.get('status') });
        const verb = { active: 'resumed', paused: 'paused', revoked: 'revoked' }[updated.status];
        return { type: 'redirect', to: back, flash: { kind: 'ok', text: `Agent ${updated.name} ${verb}.` } };
      } catch (err) {
        const e = errorText(err);
        if (e.kind === 'internal') throw err;
        return { type: 'redirect', to: back, flash: { kind: 'error', text: e.text } };
      }
    },
  },
  {
    method: 'POST',
    path: '/dashboard/agents/{id}/policy',
    permission: 'manage',
    body: 'form',
    // The ceiling is typed in ETH under its own name: a post that still says wei is refused as an
    // unknown field instead of being read 10^18 times too large.
    fields: ['allowlist', 'spend_cap_usd', 'approval_threshold_usd', 'max_per_payment_usd', 'max_network_fee_eth', PREVIEW, ...LIMIT_FIELDS],
    repeatable: LIMIT_REPEATABLE,
    async handle(ctx) {
      const agent = await getAgent(ctx.deps, ctx.principal, ctx.params.id!);
      const values: PolicyValues = {
        allowlist: ctx.form.get('allowlist'), cap: ctx.form.get('spend_cap_usd'), threshold: ctx.form.get('approval_threshold_usd'),
        fee: ctx.form.has('max_network_fee_eth') ? ctx.form.get('max_network_fee_eth') : undefined,
        // Absent (a form from before the field) keeps the agent's maximum; empty removes it.
        perPayment: ctx.form.has('max_per_payment_usd') ? ctx.form.get('max_per_payment_usd') : undefined,
        // Absent (a form from before the rows) keeps the agent's limits; rows all empty or removed remove them.
        limits: limitRowsFromForm(ctx.form),
      };
      if (ctx.form.has(ADD_ROW)) {
        return agentPage(ctx, agent, { values: { ...values, limits: withBlankRow(values.limits ?? rowsOfLimits(agent.policy.limits)) }, errors: {} });
      }
      const errors = policyErrors(values);
      if (hasPolicyErrors(errors)) return agentPage(ctx, agent, { values, errors });
      const input = {
        agentId: agent.id, allowlist: allowlistLines(values.allowlist), spendCapUsd: values.cap, approvalThresholdUsd: values.threshold,
        maxNetworkFeeWei: values.fee === undefined ? undefined : maxNetworkFeeFromEth(values.fee, POLICY_LABELS.fee).toString(),
        maxPerPaymentUsd: values.perPayment,
        limits: values.limits === undefined ? undefined : limitsOfRows(values.limits),
      };
      if (ctx.form.has(PREVIEW)) return agentPage(ctx, agent, { values, errors: {}, preview: await simulatePolicyChange(ctx.deps, ctx.principal, input) });
      const { warnings } = await setPolicy(ctx.deps, ctx.principal, input);
      return { type: 'redirect', to: `/dashboard/agents/${agent.id}`, flash: { kind: 'ok', text: `Policy of ${agent.name} saved.`, warnings } };
    },
  },
];
