import { roleAllows } from '../../app/dashboardRoles.js';
import { MIN_PASSWORD_LENGTH } from '../../app/accounts/dashboardPasswords.js';
import { deleteDashboardUser, getDashboardUser, listDashboardUsers, resetDashboardUserPassword, updateDashboardUser } from '../../app/accounts/dashboardUsers.js';
import type { DashboardUser } from '../../domain/types.js';
import { utc } from '../format.js';
import { html, type Renderable } from '../html.js';
import { csrfField, fieldError, invalidAttrs, tableWrap } from '../layout.js';
import { errorText, type Reply, type Route, type RouteContext } from '../routes.js';

const ROLE_TEXT = {
  owner: 'everything, including users',
  approver: 'decides approvals, reads the rest',
  viewer: 'reads everything, changes nothing',
} as const;

/** Disable/enable, reset password and remove, for owners; removal asks first. */
function userActions(ctx: RouteContext, u: DashboardUser): Renderable {
  const { session } = ctx;
  if (!roleAllows(session.user.role, 'manage')) return '';
  const action = `/dashboard/users/${u.id}`;
  const toggle = u.disabled
    ? html`<form method="post" action="${action}/status">${csrfField({ session })}<input type="hidden" name="disabled" value="false"><button type="submit">Enable<span class="sr-only"> ${u.email}</span></button></form>`
    : html`<form method="post" action="${action}/status" data-confirm="Disable ${u.email}? They are signed out at once and cannot sign in until enabled again.">${csrfField({ session })}<input type="hidden" name="disabled" value="true"><button type="submit">Disable<span class="sr-only"> ${u.email}</span></button></form>`;
  return html`${toggle}
<a class="button" href="${action}/password">Reset password<span class="sr-only"> of ${u.email}</span></a>
<form method="post" action="${action}/remove" data-confirm="Remove ${u.email}? They are signed out at once; approvals they decided keep their email.">${csrfField({ session })}<button type="submit" class="danger">Remove<span class="sr-only"> ${u.email}</span></button></form>`;
}

async function usersPage(ctx: RouteContext): Promise<Reply> {
  const { deps, session } = ctx;
  const users = await listDashboardUsers(deps, ctx.principal, ctx.principal.orgId);
  const rows = users.map((u) => html`<tr>
<td>${u.email}${u.id === session.user.id ? html` <span class="muted small">(you)</span>` : ''}</td>
<td>${u.role} <span class="muted small">${ROLE_TEXT[u.role]}</span></td>
<td>${u.disabled ? html`<span class="badge badge-bad">disabled</span>` : html`<span class="badge badge-ok">enabled</span>`}</td>
<td>${utc(u.createdAt)}</td>
<td class="actions">${userActions(ctx, u)}</td>
</tr>`);
  return {
    type: 'page',
    section: 'users',
    title: 'Users',
    content: html`<div class="page-head"><h1>Users</h1><p class="muted">People who sign in to this organization's dashboard. The operator adds them (<code>paypolicy user create</code>); owners disable, remove and reset passwords here. An organization always keeps one enabled owner.</p></div>
${users.length === 0 ? html`<p class="empty">No users.</p>` : tableWrap('Users', html`<table>
<caption class="sr-only">Dashboard users, oldest first</caption>
<thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${rows}</tbody></table>`)}`,
  };
}

/** The reset form of one user; 404 (from the use case's scope) for anyone not of this organization. */
function passwordPage(ctx: RouteContext, user: DashboardUser, error?: string): Reply {
  const { session } = ctx;
  return {
    type: 'page',
    status: error ? 400 : 200,
    section: 'users',
    title: `Reset password of ${user.email}`,
    content: html`<p class="small"><a href="/dashboard/users">← All users</a></p>
<div class="page-head"><h1>Reset password of ${user.email}</h1><p class="muted">Every session ${user.id === session.user.id ? 'you have (this one too)' : 'they have'} ends at once; give them the new password by a channel you trust.</p></div>
<section class="panel"><form method="post" action="/dashboard/users/${user.id}/password" novalidate>${csrfField({ session })}
<div class="field"><label for="new-password">New password <span class="hint">at least ${MIN_PASSWORD_LENGTH} characters</span></label>
<input type="password" id="new-password" name="password" autocomplete="new-password" required ${invalidAttrs('new-password', error)}>
${fieldError('new-password', error)}</div>
<button type="submit" class="primary">Set password</button>
</form></section>`,
  };
}

/** The user a path names, as the signed-in owner may manage them (404 otherwise). */
async function managedUser(ctx: RouteContext): Promise<DashboardUser> {
  return await getDashboardUser(ctx.deps, ctx.principal, ctx.params.id!);
}

/** Users of the signed-in organization: list for everyone; disable, enable, remove, reset for owners. */
export const userRoutes: Route[] = [
  { method: 'GET', path: '/dashboard/users', permission: 'read', handle: async (ctx) => usersPage(ctx) },
  {
    method: 'POST',
    path: '/dashboard/users/{id}/status',
    permission: 'manage',
    body: 'form',
    fields: ['disabled'],
    async handle(ctx) {
      const value = ctx.form.get('disabled');
      // Only the two values the page's buttons send: anything else would enable the user unasked.
      if (value !== 'true' && value !== 'false') {
        return { type: 'redirect', to: '/dashboard/users', flash: { kind: 'error', text: 'Nothing was changed: disabled must be true or false.' } };
      }
      const disabled = value === 'true';
      try {
        const user = await updateDashboardUser(ctx.deps, ctx.principal, { userId: ctx.params.id!, disabled });
        return { type: 'redirect', to: '/dashboard/users', flash: { kind: 'ok', text: `${user.email} ${user.disabled ? 'disabled and signed out' : 'enabled'}.` } };
      } catch (err) {
        const e = errorText(err);
        if (e.kind !== 'failed_precondition') throw err;
        return { type: 'redirect', to: '/dashboard/users', flash: { kind: 'error', text: e.text } };
      }
    },
  },
  {
    method: 'POST',
    path: '/dashboard/users/{id}/remove',
    permission: 'manage',
    body: 'form',
    async handle(ctx) {
      try {
        const user = await deleteDashboardUser(ctx.deps, ctx.principal, ctx.params.id!);
        return { type: 'redirect', to: '/dashboard/users', flash: { kind: 'ok', text: `${user.email} removed.` } };
      } catch (err) {
        const e = errorText(err);
        if (e.kind !== 'failed_precondition') throw err;
        return { type: 'redirect', to: '/dashboard/users', flash: { kind: 'error', text: e.text } };
      }
    },
  },
  { method: 'GET', path: '/dashboard/users/{id}/password', permission: 'manage', handle: async (ctx) => passwordPage(ctx, await managedUser(ctx)) },
  {
    method: 'POST',
    path: '/dashboard/users/{id}/password',
    permission: 'manage',
    body: 'form',
    fields: ['password'],
    async handle(ctx) {
      const user = await managedUser(ctx);
      try {
        await resetDashboardUserPassword(ctx.deps, ctx.principal, { userId: user.id, password: ctx.form.get('password') });
      } catch (err) {
        const e = errorText(err);
        if (e.kind !== 'invalid_argument') throw err;
        return passwordPage(ctx, user, e.text);
      }
      return { type: 'redirect', to: '/dashboard/users', flash: { kind: 'ok', text: `Password of ${user.email} reset; their sessions have ended.` } };
    },
  },
];
