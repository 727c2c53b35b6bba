import type { Logger } from 'pino';
import { listApprovals } from '../app/approvals/approvals.js';
import { roleAllows } from '../app/dashboardRoles.js';
import { authenticateSession, sessionPrincipal, signOut } from '../app/accounts/dashboardSessions.js';
import type { AppDeps } from '../app/deps.js';
import { getOrganization } from '../app/organizations/organizations.js';
import { BodyTooLargeError, RequestClosedError, type NodeRequest, type NodeResponse } from '../http/io.js';
import { createRouter, decodePathParam } from '../http/router.js';
import { loadAssets, sendAsset } from './assets.js';
import { csrfPresented, isCrossSite } from './csrf.js';
import { createFlashes } from './flashes.js';
import { UnsupportedBody, readForm } from './forms.js';
import { readCookies, redirect, sendText, setSecurityHeaders } from './http.js';
import { MultipartError } from './multipart.js';
import { agentRoutes } from './pages/agents.js';
import { apiKeyRoutes } from './pages/apiKeys.js';
import { approvalRoutes } from './pages/approvals.js';
import { serviceRoutes } from './pages/services.js';
import { SESSION_COOKIE, clearedCookie } from './pages/signIn.js';
import { spendRoutes } from './pages/spend.js';
import { transactionRoutes } from './pages/transactions.js';
import { userRoutes } from './pages/users.js';
import { createReplies, wantsJson } from './replies.js';
import { FormFields, errorText, type Reply, type Route, type RouteContext } from './routes.js';
import { SIGN_IN_PATH, serveSignIn } from './signInRoute.js';

export type Dashboard = {
  /** Takes every request under /dashboard (answering it asynchronously) and returns true; false for any other path. */
  handle: (req: NodeRequest, res: NodeResponse, log: Logger) => boolean;
};

/** Home is the approvals page while anything waits for a decision. */
const home: Route['handle'] = async (ctx) => {
  const pending = (await listApprovals(ctx.deps, ctx.principal, ctx.principal.orgId, 'pending')).length;
  return { type: 'redirect', to: pending > 0 ? '/dashboard/approvals' : '/dashboard/agents' };
};

/** The home redirect and sign-out: the signed-in routes that are about the session itself. */
const sessionRoutes: Route[] = [
  { method: 'GET', path: '/dashboard', permission: 'read', handle: home },
  { method: 'GET', path: '/dashboard/', permission: 'read', handle: home },
  {
    method: 'POST',
    path: '/dashboard/sign-out',
    permission: 'read',
    body: 'form',
    async handle(ctx) {
      await signOut(ctx.deps, ctx.session);
      return { type: 'redirect', to: '/dashboard/sign-in', headers: { 'set-cookie': clearedCookie(ctx.req, SESSION_COOKIE) } };
    },
  },
];

/**
 * The web dashboard: server-rendered pages under /dashboard for the people who run an
 * organization's agents. Every change goes through the same use cases as the AdminService, limited
 * to the signed-in user's organization and role. Mount `handle` as the server's extraHandler.
 *
 * A request passes, in order: static files; the session cookie; sign-in (signInRoute.ts); the
 * route table (404, 405); no session (redirect or 401); for a POST, the cross-site check, the
 * bounded form read (forms.ts) and the CSRF token (csrf.ts); the route's permission; the handler,
 * whose Reply replies.ts writes.
 */
export function createDashboard(deps: AppDeps): Dashboard {
  const assets = loadAssets();
  const flashes = createFlashes();
  const replies = createReplies(deps, assets.version, flashes);
  const { refuse, errorPage } = replies;
  const router = createRouter<Route>([
    ...sessionRoutes, ...approvalRoutes, ...agentRoutes, ...spendRoutes, ...transactionRoutes, ...apiKeyRoutes, ...serviceRoutes, ...userRoutes,
  ]);

  async function serve(req: NodeRequest, res: NodeResponse, log: Logger): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
    const path = url.pathname;
    const method = req.method === 'HEAD' ? 'GET' : req.method;

    const file = method === 'GET' ? assets.byPath.get(path) : undefined;
    if (file) return sendAsset(req, res, file);

    const session = await authenticateSession(deps, readCookies(req).get(SESSION_COOKIE));
    if (path === SIGN_IN_PATH) return serveSignIn(deps, req, res, log, session !== undefined, assets.version);

    const match = router.match(method, path);
    if (match.kind === 'not_found') return errorPage(res, 404, 'Not found', 'There is no such page.', session);
    if (match.kind === 'method_not_allowed') return sendText(res, 405, 'Method not allowed', { allow: match.allow.join(', ') });
    const route = match.route;

    if (!session) {
      if (method === 'GET' && !wantsJson(req, path)) return redirect(res, '/dashboard/sign-in');
      return refuse(req, res, path, 401, 'Sign in first.', undefined);
    }

    let form = new FormFields(new Map());
    let files = new Map<string, Buffer>();
    if (method === 'POST') {
      if (isCrossSite(req)) return refuse(req, res, path, 403, 'Cross-site requests are not accepted.', session);
      try {
        ({ form, files } = await readForm(req, route.body ?? 'form'));
      } catch (err) {
        // The rest of the body may still be arriving: send() closes this HTTP/1.x connection after the answer.
        if (err instanceof BodyTooLargeError) return refuse(req, res, path, 413, 'The form is too large.', session);
        if (err instanceof UnsupportedBody || err instanceof MultipartError) return refuse(req, res, path, 400, err.message, session);
        // The browser went away mid-upload: nobody reads this answer, and it is not our failure.
        if (err instanceof RequestClosedError) return refuse(req, res, path, 400, 'The form did not arrive whole.', session);
        throw err;
      }
      // The body may have taken its time: a user disabled, removed or reset meanwhile acts no more.
      if (!await authenticateSession(deps, readCookies(req).get(SESSION_COOKIE))) return refuse(req, res, path, 401, 'Sign in first.', undefined);
      if (!csrfPresented(req, session, form)) {
        log.warn({ userId: session.user.id, path }, 'dashboard post refused: missing or wrong CSRF token');
        return refuse(req, res, path, 403, 'This form has expired or did not come from the dashboard. Reload the page and try again.', session);
      }
    }
    if (route.permission !== 'public' && !roleAllows(session.user.role, route.permission)) {
      log.warn({ userId: session.user.id, role: session.user.role, path }, 'dashboard request refused: role lacks permission');
      return refuse(req, res, path, 403, `Your role (${session.user.role}) does not allow this.`, session);
    }
    const fields = route.fields;
    const unknownField = fields ? [...form.names()].find((name) => name !== '_csrf' && !fields.includes(name)) : undefined;
    if (unknownField !== undefined) {
      return refuse(req, res, path, 400, `Unknown form field "${unknownField.slice(0, 40)}": nothing was changed.`, session);
    }
    const repeatedField = form.repeated().find((name) => !route.repeatable?.includes(name));
    if (repeatedField !== undefined) {
      return refuse(req, res, path, 400, `Form field "${repeatedField.slice(0, 40)}" was given more than once: nothing was changed.`, session);
    }

    const params: Record<string, string> = {};
    for (const [name, raw] of Object.entries(match.params)) {
      const value = decodePathParam(raw);
      if (value === undefined) return errorPage(res, 404, 'Not found', 'There is no such page.', session);
      params[name] = value;
    }
    const principal = sessionPrincipal(session);
    const ctx: RouteContext = {
      deps, req, res, log, url, params, form, files, session, principal,
      page: async () => ({
        session,
        orgName: (await getOrganization(deps, principal, principal.orgId)).name,
        now: deps.now(),
        pendingCount: (await listApprovals(deps, principal, principal.orgId, 'pending')).length,
        flash: flashes.take(session),
        assetVersion: assets.version,
      }),
    };

    let reply: Reply;
    try {
      reply = await route.handle(ctx);
    } catch (err) {
      const e = errorText(err);
      if (e.kind === 'internal') {
        log.error({ err }, 'dashboard handler failed');
        return refuse(req, res, path, 500, 'Something went wrong. The details are in the server log.', session);
      }
      return refuse(req, res, path, e.status, e.text, session);
    }
    await replies.write(res, ctx, reply);
  }

  return {
    handle(req, res, log) {
      const path = (req.url ?? '/').split('?')[0]!;
      if (path !== '/dashboard' && !path.startsWith('/dashboard/')) return false;
      setSecurityHeaders(res);
      serve(req, res, log).catch((err: unknown) => {
        log.error({ err }, 'dashboard request failed');
        if (!res.headersSent) sendText(res, 500, 'Internal error');
        else res.destroy();
      });
      return true;
    },
  };
}
