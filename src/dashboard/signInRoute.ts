import type { Logger } from 'pino';
import type { AppDeps } from '../app/deps.js';
import { BodyTooLargeError, RequestClosedError, type NodeRequest, type NodeResponse } from '../http/io.js';
import { isCrossSite } from './csrf.js';
import { UnsupportedBody, readForm } from './forms.js';
import { redirect, sendHtml, sendText } from './http.js';
import { FormFields } from './routes.js';
import { SIGN_IN_COOKIE, attemptSignIn, clearedCookie, sessionCookie, signInPage, signInTokenMatches } from './pages/signIn.js';

export const SIGN_IN_PATH = '/dashboard/sign-in';

/**
 * /dashboard/sign-in, the one page served without a session. It answers HEAD too (for the
 * 405's Allow), has its own double-submit token instead of a session's CSRF token, and a
 * malformed form is a plain 400.
 */
export async function serveSignIn(deps: AppDeps, req: NodeRequest, res: NodeResponse, log: Logger, signedIn: boolean, assetVersion: string): Promise<void> {
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  if (method === 'GET') {
    if (signedIn) return redirect(res, '/dashboard');
    const r = signInPage(req, 200, '', undefined, assetVersion, deps.now());
    return sendHtml(res, r.status, r.html, r.headers);
  }
  if (method !== 'POST') return sendText(res, 405, 'Method not allowed', { allow: 'GET, HEAD, POST' });

  let form: FormFields;
  try {
    ({ form } = await readForm(req, 'form'));
  } catch (err) {
    if (err instanceof BodyTooLargeError || err instanceof UnsupportedBody || err instanceof RequestClosedError) return sendText(res, 400, 'Malformed sign-in form');
    throw err;
  }
  // Which of two emails or passwords was meant is not guessed (FormFields.get would take the first).
  if (form.repeated().length > 0) return sendText(res, 400, 'Malformed sign-in form');
  const email = form.get('email').slice(0, 320);
  if (isCrossSite(req) || !signInTokenMatches(req, form.get('_csrf'))) {
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
