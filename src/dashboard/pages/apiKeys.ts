import { createApiKey, listApiKeys, revokeApiKey } from '../../app/accounts/apiKeys.js';
import { roleAllows } from '../../app/dashboardRoles.js';
import { utc } from '../format.js';
import { html } from '../html.js';
import { csrfField, errorSummary, fieldError, invalidAttrs, tableWrap } from '../layout.js';
import { errorText, type Reply, type Route, type RouteContext } from '../routes.js';

async function keysPage(ctx: RouteContext, createError?: { label: string; message: string }): Promise<Reply> {
  const { deps, session } = ctx;
  const keys = await listApiKeys(deps, ctx.principal, ctx.principal.orgId);
  const manage = roleAllows(session.user.role, 'manage');
  const rows = keys.map((k) => html`<tr>
<td class="mono">${k.prefix}…</td>
<td>${k.label === '' ? html`<span class="muted">no label</span>` : k.label}</td>
<td>${k.mode}</td>
<td>${utc(k.createdAt)}</td>
<td>${k.revokedAt === null ? html`<span class="badge badge-ok">active</span>` : html`<span class="badge badge-bad">revoked</span> <span class="small muted">${utc(k.revokedAt)}</span>`}</td>
<td class="actions">${manage && k.revokedAt === null && html`<form method="post" action="/dashboard/keys/${k.id}/revoke" data-confirm="Revoke the key ${k.prefix}…${k.label ? ` (${k.label})` : ''}? Agents using it get 401 from their next request.">${csrfField({ session })}<button type="submit" class="danger">Revoke<span class="sr-only"> key ${k.prefix} ${k.label}</span></button></form>`}</td>
</tr>`);
  const create = manage
    ? html`<section class="panel" aria-labelledby="new-key"><h2 id="new-key">Create a key</h2>
${errorSummary([['key-label', createError?.message]])}
<form class="inline-form" method="post" action="/dashboard/keys">${csrfField({ session })}
<div class="field"><label for="key-label">Label <span class="hint">(which agent or machine uses it)</span></label>
<input type="text" id="key-label" name="label" maxlength="200" value="${createError?.label ?? ''}" ${invalidAttrs('key-label', createError?.message)}>
${fieldError('key-label', createError?.message)}</div>
<div class="field"><label for="key-mode">Mode</label><select id="key-mode" name="mode">
<option value="test">test: Base and Base Sepolia</option><option value="live">live: Base only</option></select></div>
<button type="submit" class="primary">Create key</button>
</form>
<p class="small muted">The key is shown once. Rotate by creating a new key, switching the agent to it, then revoking the old one.</p></section>`
    : '';
  return {
    type: 'page',
    status: createError ? 400 : 200,
    section: 'keys',
    title: 'API keys',
    content: html`<div class="page-head"><h1>API keys</h1><p class="muted">Agents authenticate with these. Only a prefix is stored in readable form.</p></div>
${create}
${keys.length === 0 ? html`<p class="empty">No API keys.</p>` : tableWrap('API keys', html`<table>
<caption class="sr-only">API keys, newest first</caption>
<thead><tr><th scope="col">Prefix</th><th scope="col">Label</th><th scope="col">Mode</th><th scope="col">Created</th><th scope="col">Status</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${rows}</tbody></table>`)}`,
  };
}

/** API keys: list, create (shown once) and revoke. */
export const apiKeyRoutes: Route[] = [
  { method: 'GET', path: '/dashboard/keys', permission: 'read', handle: async (ctx) => keysPage(ctx) },
  {
    method: 'POST',
    path: '/dashboard/keys',
    permission: 'manage',
    body: 'form',
    fields: ['label', 'mode'],
    async handle(ctx) {
      const label = ctx.form.get('label');
      const mode = ctx.form.get('mode');
      try {
        const r = await createApiKey(ctx.deps, ctx.principal, { orgId: ctx.principal.orgId, mode: mode === 'live' || mode === 'test' ? mode : undefined, label });
        // The plaintext rides in the one-time flash of this session and is gone after one page view.
        return { type: 'redirect', to: '/dashboard/keys', flash: { kind: 'ok', text: `Key ${r.key.prefix}… created.`, secret: r.plaintext } };
      } catch (err) {
        const e = errorText(err);
        if (e.kind !== 'invalid_argument') throw err;
        return keysPage(ctx, { label, message: e.text });
      }
    },
  },
  {
    method: 'POST',
    path: '/dashboard/keys/{id}/revoke',
    permission: 'manage',
    body: 'form',
    async handle(ctx) {
      const key = await revokeApiKey(ctx.deps, ctx.principal, ctx.params.id!);
      return { type: 'redirect', to: '/dashboard/keys', flash: { kind: 'ok', text: `Key ${key.prefix}… revoked.` } };
    },
  },
];
