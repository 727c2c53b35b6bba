import { listApprovals } from '../app/approvals/approvals.js';
import type { AppDeps } from '../app/deps.js';
import { sessionPrincipal, type SessionContext } from '../app/accounts/dashboardSessions.js';
import { getOrganization } from '../app/organizations/organizations.js';
import { sendJson, type NodeRequest, type NodeResponse } from '../http/io.js';
import type { Flashes } from './flashes.js';
import { html } from './html.js';
import { redirect, sendHtml } from './http.js';
import { barePage, page, type PageContext } from './layout.js';
import type { Reply, RouteContext } from './routes.js';

/** Turns what handlers answer, and the dashboard's own refusals, into responses. */
export type Replies = {
  /** An error for people: a page (with the navigation when signed in) or, for data requests, `{"error": text}`. */
  refuse: (req: NodeRequest, res: NodeResponse, path: string, status: number, text: string, session: SessionContext | undefined) => Promise<void>;
  /** An error page, whatever the request wanted. */
  errorPage: (res: NodeResponse, status: number, title: string, text: string, session: SessionContext | undefined) => Promise<void>;
  write: (res: NodeResponse, ctx: RouteContext, reply: Reply) => Promise<void>;
};

/** JSON is for the script's requests and the .json routes; everything else gets a page. */
export function wantsJson(req: NodeRequest, path: string): boolean {
  return path.endsWith('.json') || /application\/json/.test(req.headers.accept ?? '');
}

export function createReplies(deps: AppDeps, assetVersion: string, flashes: Flashes): Replies {
  const errorPage: Replies['errorPage'] = async (res, status, title, text, session) => {
    const content = html`<h1>${title}</h1><p>${text}</p><p><a href="/dashboard">Back to the dashboard</a></p>`;
    if (!session) return sendHtml(res, status, barePage(title, assetVersion, deps.now(), content));
    let orgName = '';
    let pendingCount = 0;
    try {
      const principal = sessionPrincipal(session);
      orgName = (await getOrganization(deps, principal, session.user.orgId)).name;
      // The navigation's badge, as on every other page: an error page is often where a link led.
      pendingCount = (await listApprovals(deps, principal, session.user.orgId, 'pending')).length;
    } catch {
      // the page still renders without the organization's name or the count
    }
    const ctx: PageContext = { session, orgName, now: deps.now(), pendingCount, flash: undefined, assetVersion };
    return sendHtml(res, status, page(ctx, undefined, title, content));
  };

  return {
    errorPage,
    async refuse(req, res, path, status, text, session) {
      if (wantsJson(req, path)) return sendJson(res, status, { error: text });
      return errorPage(res, status, status === 403 ? 'Not allowed' : 'Error', text, session);
    },
    async write(res, ctx, reply) {
      switch (reply.type) {
        case 'page':
          return sendHtml(res, reply.status ?? 200, page(await ctx.page(), reply.section, reply.title, reply.content));
        case 'html':
          return sendHtml(res, reply.status, reply.html, reply.headers);
        case 'redirect':
          if (reply.flash) flashes.set(ctx.session, reply.flash);
          return redirect(res, reply.to, reply.headers);
        case 'json':
          return sendJson(res, reply.status ?? 200, reply.body);
        case 'stream':
          res.writeHead(200, reply.headers);
          return reply.write(res);
      }
    },
  };
}
