import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { listApprovals } from '../app/approvals.js';
import { roleAllows } from '../app/dashboardRoles.js';
import { authenticateSession, csrfTokenMatches, sessionPrincipal, signOut, type SessionContext } from '../app/dashboardSessions.js';
import type { AppDeps } from '../app/deps.js';
import { getOrganization } from '../app/organizations.js';
import { html } from './html.js';
import {
  BodyTooLargeError, SECURITY_HEADERS, readBodyLimited, readCookies, redirect, sendAsset, sendHtml, sendJson, sendText,
  type NodeRequest, type NodeResponse,
} from './http.js';
import { barePage, page, type Flash, type PageContext } from './layout.js';
import { MultipartError, multipartBoundary, parseMultipart } from './multipart.js';
import { agentRoutes } from './pages/agents.js';
import { apiKeyRoutes } from './pages/apiKeys.js';
import { approvalRoutes } from './pages/approvals.js';
import { MAX_IMPORT_BYTES, serviceRoutes } from './pages/services.js';
import {
  SESSION_COOKIE, SIGN_IN_COOKIE, attemptSignIn, clearedCookie, sessionCookie, signInPage, signInTokenMatches,
} from './pages/signIn.js';
import { spendRoutes } from './pages/spend.js';
import { transactionRoutes } from './pages/transactions.js';
import { FormFields, errorText, type Reply, type Route, type RouteContext } from './routes.js';
import { clientScript } from './static/client.js';
import { styles } from './static/styles.js';

export type Dashboard = {
  /** Takes every request under /dashboard (answering it asynchronously) and returns true; false for any other path. */
  handle: (req: NodeRequest, res: NodeResponse, log: Logger) => boolean;
};

/** Form posts are small; the registry import may carry a file. */
const MAX_FORM_BYTES = 64 * 1024;
const MAX_MULTIPART_BYTES = MAX_IMPORT_BYTES + 64 * 1024;
/** Flash messages waiting for their page view, at most this many (oldest dropped first). */
const MAX_PENDING_FLASHES = 10_000;

type Asset = { body: Buffer; etag: string; contentType: string };

function asset(text: string, contentType: string): Asset {
  const body = Buffer.from(text, 'utf8');
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 16)}"`, contentType };
}

/** Sign-in, sign-out and the home redirect: the routes that are about the session itself. */
function sessionRoutes(): Route[] {
  return [
    {
      method: 'GET',
      pattern: /^\/dashboard\/?$/,
      permission: 'read',
      handle(ctx) {
        // Home is the approvals page while anything waits for a decision.
        const pending = listApprovals(ctx.deps, ctx.principal, ctx.principal.orgId, 'pending').length;
        return { type: 'redirect', to: pending > 0 ? '/dashboard/approvals' : '/dashboard/agents' };
      },
    },
    {
      method: 'POST',
      pattern: /^\/dashboard\/sign-out$/,
      permission: 'read',
      body: 'form',
      handle(ctx) {
        signOut(ctx.deps, ctx.session);
        return { type: 'redirect', to: '/dashboard/sign-in', headers: { 'set-cookie': clearedCookie(ctx.req, SESSION_COOKIE) } };
      },
    },
  ];
}

/**
 * The web dashboard: server-rendered pages under /dashboard for the people who run an
 * organization's agents. Every change goes through the same use cases as the AdminService, limited
 * to the signed-in user's organization and role. Mount `handle` as the server's extraHandler.
 */
export function createDashboard(deps: AppDeps): Dashboard {
  const css = asset(styles, 'text/css; charset=utf-8');
  const js = asset(clientScript, 'text/javascript; charset=utf-8');
  const assetVersion = createHash('sha256').update(css.etag).update(js.etag).digest('hex').slice(0, 10);
  const routes: Route[] = [
    ...sessionRoutes(), ...approvalRoutes, ...agentRoutes, ...spendRoutes, ...transactionRoutes, ...apiKeyRoutes, ...serviceRoutes,
  ];
  // One-time messages for the page after a redirect, keyed by session. Memory only: a restart
  // loses at most a confirmation (or a just-created key, which the user can then revoke and redo).
  const flashes = new Map<string, Flash>();
  const setFlash = (session: SessionContext, flash: Flash) => {
    const key = session.tokenHash.toString('hex');
    flashes.delete(key);
    flashes.set(key, flash);
    if (flashes.size > MAX_PENDING_FLASHES) flashes.delete(flashes.keys().next().value!);
  };
  const takeFlash = (session: SessionContext): Flash | undefined => {
    const key = session.tokenHash.toString('hex');
    const flash = flashes.get(key);
    flashes.delete(key);
    return flash;
  };

  const errorPage = (res: NodeResponse, status: number, title: string, text: string, session: SessionContext | undefined) => {
    const content = html`<h1>${title}</h1><p>${text}</p><p><a href="/dashboard">Back to the dashboard</a></p>`;
    if (!session) return sendHtml(res, status, barePage(title, assetVersion, deps.now(), content));
    let orgName = '';
    try {
      orgName = getOrganization(deps, sessionPrincipal(session), session.user.orgId).name;
    } catch {
      // the page still renders without the organization's name
    }
    const ctx: PageContext = { session, orgName, now: deps.now(), pendingCount: 0, flash: undefined, assetVersion };
    return sendHtml(res, status, page(ctx, undefined, title, content));
  };

  const wantsJson = (req: NodeRequest, path: string) => path.endsWith('.json') || /application\/json/.test(req.headers.accept ?? '');

  const refuse = (req: NodeRequest, res: NodeResponse, path: string, status: number, text: string, session: SessionContext | undefined) => {
    if (wantsJson(req, path)) return sendJson(res, status, { error: text });
    return errorPage(res, status, status === 403 ? 'Not allowed' : 'Error', text, session);
  };

  async function serve(req: NodeRequest, res: NodeResponse, log: Logger): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
    const path = url.pathname;
    const method = req.method === 'HEAD' ? 'GET' : req.method;

    if (method === 'GET' && path === '/dashboard/static/dashboard.css') return sendAsset(req, res, css);
    if (method === 'GET' && path === '/dashboard/static/dashboard.js') return sendAsset(req, res, js);

    const cookies = readCookies(req);
    const session = authenticateSession(deps, cookies.get(SESSION_COOKIE));

    if (path === '/dashboard/sign-in') {
      if (method === 'GET') {
        if (session) return redirect(res, '/dashboard');
        const r = signInPage(req, 200, '', undefined, assetVersion, deps.now());
        return sendHtml(res, r.status, r.html, r.headers);
      }
      if (method === 'POST') return postSignIn(req, res, log);
      return sendText(res, 405, 'Method not allowed', { allow: 'GET, HEAD, POST' });
    }

    const matching = routes.filter((r) => r.pattern.test(path));
    if (matching.length === 0) return errorPage(res, 404, 'Not found', 'There is no such page.', session);
    const route = matching.find((r) => r.method === method);
    if (!route) return sendText(res, 405, 'Method not allowed', { allow: [...new Set(matching.map((r) => r.method))].join(', ') });

    if (!session) {
      if (method === 'GET' && !wantsJson(req, path)) return redirect(res, '/dashboard/sign-in');
      return refuse(req, res, path, 401, 'Sign in first.', undefined);
    }

    let form = new FormFields(new Map());
    let files = new Map<string, Buffer>();
    if (method === 'POST') {
      // Browsers label cross-site requests; SameSite=Strict already keeps the cookie off them,
      // this refuses them before the body is even read.
      if (req.headers['sec-fetch-site'] === 'cross-site') return refuse(req, res, path, 403, 'Cross-site requests are not accepted.', session);
      try {
        ({ form, files } = await readForm(req, route.body ?? 'form'));
      } catch (err) {
        if (err instanceof BodyTooLargeError) {
          // The rest of the body may still be arriving: this HTTP/1.1 connection cannot be reused.
          if (req.httpVersion === '1.1') res.setHeader('connection', 'close');
          return refuse(req, res, path, 413, 'The form is too large.', session);
        }
        if (err instanceof UnsupportedBody || err instanceof MultipartError) return refuse(req, res, path, 400, err.message, session);
        throw err;
      }
      const presented = (req.headers['x-csrf-token'] as string | undefined) ?? (form.has('_csrf') ? form.get('_csrf') : undefined);
      if (!csrfTokenMatches(session, presented)) {
        log.warn({ userId: session.user.id, path }, 'dashboard post refused: missing or wrong CSRF token');
        return refuse(req, res, path, 403, 'This form has expired or did not come from the dashboard. Reload the page and try again.', session);
      }
    }
    if (route.permission !== 'public' && !roleAllows(session.user.role, route.permission)) {
      log.warn({ userId: session.user.id, role: session.user.role, path }, 'dashboard request refused: role lacks permission');
      return refuse(req, res, path, 403, `Your role (${session.user.role}) does not allow this.`, session);
    }

    const match = route.pattern.exec(path)!;
    let params: string[];
    try {
      params = match.slice(1).map((p) => decodeURIComponent(p ?? ''));
    } catch {
      return errorPage(res, 404, 'Not found', 'There is no such page.', session);
    }
    const principal = sessionPrincipal(session);
    const ctx: RouteContext = {
      deps, req, res, log, url, params, form, files, session, principal,
      page: () => ({
        session,
        orgName: getOrganization(deps, principal, principal.orgId).name,
        now: deps.now(),
        pendingCount: listApprovals(deps, principal, principal.orgId, 'pending').length,
        flash: takeFlash(session),
        assetVersion,
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
    await writeReply(res, ctx, reply);
  }

  async function writeReply(res: NodeResponse, ctx: RouteContext, reply: Reply): Promise<void> {
    switch (reply.type) {
      case 'page':
        return sendHtml(res, reply.status ?? 200, page(ctx.page(), reply.section, reply.title, reply.content));
      case 'html':
        return sendHtml(res, reply.status, reply.html, reply.headers);
      case 'redirect':
        if (reply.flash) setFlash(ctx.session, reply.flash);
        return redirect(res, reply.to, reply.headers);
      case 'json':
        return sendJson(res, reply.status ?? 200, reply.body);
      case 'stream':
        res.writeHead(200, { ...SECURITY_HEADERS, ...reply.headers });
        return reply.write(res);
    }
  }

  async function postSignIn(req: NodeRequest, res: NodeResponse, log: Logger): Promise<void> {
    let form: FormFields;
    try {
      ({ form } = await readForm(req, 'form'));
    } catch (err) {
      if (err instanceof BodyTooLargeError || err instanceof UnsupportedBody) return sendText(res, 400, 'Malformed sign-in form');
      throw err;
    }
    const email = form.get('email').slice(0, 320);
    if (req.headers['sec-fetch-site'] === 'cross-site' || !signInTokenMatches(req, form.get('_csrf'))) {
      const r = signInPage(req, 403, email, 'The sign-in form expired. Please try again.', assetVersion, deps.now());
      return sendHtml(res, r.status, r.html, r.headers);
    }
    // The socket's peer: behind a reverse proxy that is the proxy, shared by all its clients.
    const outcome = await attemptSignIn(deps, email, form.get('password'), req.socket.remoteAddress);
    if (!outcome.ok) {
      log.info({ code: outcome.code }, 'dashboard sign-in refused');
      const r = signInPage(req, outcome.status, email, outcome.message, assetVersion, deps.now());
      return sendHtml(res, r.status, r.html, r.headers);
    }
    log.info({ userId: outcome.userId }, 'dashboard sign-in');
    return redirect(res, '/dashboard', { 'set-cookie': [sessionCookie(req, outcome.token), clearedCookie(req, SIGN_IN_COOKIE)] });
  }

  return {
    handle(req, res, log) {
      const path = (req.url ?? '/').split('?')[0]!;
      if (path !== '/dashboard' && !path.startsWith('/dashboard/')) return false;
      serve(req, res, log).catch((err: unknown) => {
        log.error({ err }, 'dashboard request failed');
        if (!res.headersSent) sendText(res, 500, 'Internal error');
        else res.destroy();
      });
      return true;
    },
  };
}

class UnsupportedBody extends Error {}

/** Reads a POST body as urlencoded fields or, for `multipart` routes, as multipart form data. */
async function readForm(req: NodeRequest, kind: 'form' | 'multipart'): Promise<{ form: FormFields; files: Map<string, Buffer> }> {
  const type = req.headers['content-type'] ?? '';
  const fields = new Map<string, string[]>();
  const files = new Map<string, Buffer>();
  const add = (name: string, value: string) => fields.set(name, [...(fields.get(name) ?? []), value]);
  const boundary = kind === 'multipart' ? multipartBoundary(type) : undefined;
  if (boundary !== undefined) {
    const body = await readBodyLimited(req, MAX_MULTIPART_BYTES);
    for (const part of await parseMultipart(body, boundary)) {
      if (part.filename !== undefined) files.set(part.name, part.data);
      else add(part.name, part.data.toString('utf8'));
    }
    return { form: new FormFields(fields), files };
  }
  const body = await readBodyLimited(req, MAX_FORM_BYTES);
  if (body.length > 0 && !/^application\/x-www-form-urlencoded\b/i.test(type)) throw new UnsupportedBody('Expected a form (application/x-www-form-urlencoded).');
  for (const [name, value] of new URLSearchParams(body.toString('utf8'))) add(name, value);
  return { form: new FormFields(fields), files };
}
