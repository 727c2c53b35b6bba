import { chromium, type Browser } from 'playwright-core';
import { DashboardRole } from '../../gen/paypolicy/v1/admin_pb.js';
import type { Admin } from '../helpers/admin.js';

/** Debian's chromium; Playwright cannot download a browser here. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic', '--no-first-run', '--disable-component-update', '--disable-sync'],
  });
}

const ROLES = { owner: DashboardRole.OWNER, approver: DashboardRole.APPROVER, viewer: DashboardRole.VIEWER } as const;

/** Creates a dashboard user through AdminService.CreateDashboardUser, as an operator would. */
export async function createUser(admin: Admin, orgId: string, email: string, role: keyof typeof ROLES, password: string) {
  const r = await admin.client.createDashboardUser({ orgId, email, role: ROLES[role], password }, admin.auth);
  return r.user!;
}

/** A signed-in session driven with fetch: the cookie header to send and the session's CSRF token. */
export type HttpSession = { cookie: string; csrf: string };

function cookiePair(setCookie: string[], name: string): string {
  const c = setCookie.find((x) => x.startsWith(`${name}=`));
  if (!c) throw new Error(`no ${name} cookie in ${JSON.stringify(setCookie)}`);
  return c.split(';')[0]!;
}

/** The sign-in page's cookie and form token, as a browser would hold them. */
export async function signInForm(base: string): Promise<{ cookie: string; token: string }> {
  const page = await fetch(`${base}/dashboard/sign-in`, { headers: { connection: 'close' } });
  const html = await page.text();
  return { cookie: cookiePair(page.headers.getSetCookie(), 'pp_signin'), token: /name="_csrf" value="([^"]+)"/.exec(html)![1]! };
}

/** POST /dashboard/sign-in with a valid form token; returns the raw response. */
export async function postSignIn(base: string, email: string, password: string): Promise<Response> {
  const form = await signInForm(base);
  return fetch(`${base}/dashboard/sign-in`, {
    method: 'POST', redirect: 'manual',
    headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded', connection: 'close' },
    body: new URLSearchParams({ _csrf: form.token, email, password }),
  });
}

/** Signs in with fetch and reads the CSRF token from the first page. */
export async function httpSignIn(base: string, email: string, password: string): Promise<HttpSession> {
  const r = await postSignIn(base, email, password);
  if (r.status !== 303) throw new Error(`sign-in failed with ${r.status}: ${await r.text()}`);
  const cookie = cookiePair(r.headers.getSetCookie(), 'pp_session');
  const page = await fetch(`${base}/dashboard/agents`, { headers: { cookie, connection: 'close' } });
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!;
  return { cookie, csrf };
}

/** A dashboard request with the session cookie; `form` is sent urlencoded (as pairs when a name repeats). */
export function dashboardFetch(
  base: string, session: HttpSession | undefined, path: string,
  init: { method?: string; form?: Record<string, string> | Array<[string, string]>; headers?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = { connection: 'close', ...init.headers };
  if (session) headers.cookie = session.cookie;
  let body: string | undefined;
  if (init.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(init.form).toString();
  }
  return fetch(`${base}${path}`, { method: init.method ?? (body ? 'POST' : 'GET'), headers, body, redirect: 'manual' });
}

/** POST /dashboard/services/import with `records` pasted as JSON, as the dashboard's form sends it. */
export function importServicesJson(base: string, session: HttpSession, records: unknown[]): Promise<Response> {
  const boundary = 'XimportBoundary';
  const body = `--${boundary}\r\nContent-Disposition: form-data; name="_csrf"\r\n\r\n${session.csrf}\r\n`
    + `--${boundary}\r\nContent-Disposition: form-data; name="json"\r\n\r\n${JSON.stringify(records)}\r\n--${boundary}--\r\n`;
  return fetch(`${base}/dashboard/services/import`, {
    method: 'POST', redirect: 'manual', body,
    headers: { cookie: session.cookie, 'content-type': `multipart/form-data; boundary=${boundary}`, connection: 'close' },
  });
}
