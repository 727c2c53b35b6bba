import { randomBytes, timingSafeEqual } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { signIn, SESSION_TTL_MS } from '../../app/accounts/dashboardSessions.js';
import { toDomainError } from '../../domain/errors.js';
import { html, type Html } from '../html.js';
import { cookie, readCookies, type NodeRequest } from '../http.js';
import { barePage } from '../layout.js';

/** The session cookie: a 256-bit token whose SHA-256 is the session's key in the database. */
export const SESSION_COOKIE = 'pp_session';
/**
 * Before a session exists, the sign-in form is protected by a double-submit token: a random value
 * in an HttpOnly SameSite=Strict cookie that must come back in the form. Another site can neither
 * read it nor make the browser send the cookie, so it cannot sign a victim into its own account.
 */
export const SIGN_IN_COOKIE = 'pp_signin';
const SIGN_IN_COOKIE_AGE_S = 3600;

/** Set-Cookie value for a new session. */
export function sessionCookie(req: NodeRequest, token: string): string {
  return cookie(req, SESSION_COOKIE, token, SESSION_TTL_MS / 1000);
}

/** Set-Cookie value that removes a dashboard cookie. */
export function clearedCookie(req: NodeRequest, name: string): string {
  return cookie(req, name, '', 0);
}

function signInForm(token: string, email: string, error: string | undefined, assetVersion: string, now: number): Html {
  return barePage('Sign in', assetVersion, now, html`<div class="signin panel">
<h1>paypolicy</h1>
<p class="muted">Sign in to approve payments and manage your organization's agents.</p>
${error !== undefined && html`<p class="flash flash-error" role="alert" id="signin-error" tabindex="-1" data-error-summary>${error}</p>`}
<form method="post" action="/dashboard/sign-in">
<input type="hidden" name="_csrf" value="${token}">
<div class="field"><label for="email">Email</label>
<input type="email" id="email" name="email" autocomplete="username" required value="${email}" ${error !== undefined ? html`aria-describedby="signin-error"` : ''}></div>
<div class="field"><label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required></div>
<button type="submit" class="primary">Sign in</button>
</form>
</div>`);
}

/** The sign-in page with a fresh double-submit token (and the cookie that carries it). */
export function signInPage(req: NodeRequest, status: number, email: string, error: string | undefined, assetVersion: string, now: number) {
  const token = randomBytes(24).toString('base64url');
  return {
    type: 'html' as const,
    status,
    html: signInForm(token, email, error, assetVersion, now),
    headers: { 'set-cookie': cookie(req, SIGN_IN_COOKIE, token, SIGN_IN_COOKIE_AGE_S) },
  };
}

/** Whether the form's token equals the sign-in cookie's, compared in constant time. */
export function signInTokenMatches(req: NodeRequest, presented: string): boolean {
  const expected = readCookies(req).get(SIGN_IN_COOKIE);
  if (expected === undefined || expected === '') return false;
  const a = Buffer.from(presented, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A refused sign-in (a lockout, or the hashing queue full) is answered after this delay. It costs
 * the server a timer, not CPU, and keeps a client that waits for each answer (most guessing tools,
 * with a fixed number of connections) to one refusal per connection per second instead of
 * thousands: without it a 64-connection flood of instant 429s took most of the event loop.
 */
export const REFUSAL_DELAY_MS = 1000;

export type SignInOutcome =
  | { ok: true; token: string; userId: string }
  | { ok: false; status: number; message: string; code: string };

/** Runs the sign-in use case and turns its refusals into what the page shows. */
export async function attemptSignIn(deps: Parameters<typeof signIn>[0], email: string, password: string, clientAddress: string | undefined): Promise<SignInOutcome> {
  try {
    const r = await signIn(deps, { email, password, clientAddress });
    return { ok: true, token: r.token, userId: r.user.id };
  } catch (err) {
    const e = toDomainError(err);
    if (e.kind !== 'unauthenticated') throw err;
    // Lockouts and a full password-hashing queue are "slow down", not "wrong password".
    if (e.code === 'invalid_credentials') return { ok: false, status: 401, message: e.shortMessage, code: e.code };
    await delay(REFUSAL_DELAY_MS);
    return { ok: false, status: 429, message: e.shortMessage, code: e.code };
  }
}
