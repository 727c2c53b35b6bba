import { csrfTokenMatches, type SessionContext } from '../app/accounts/dashboardSessions.js';
import { requestHeader, type NodeRequest } from '../http/io.js';
import type { FormFields } from './routes.js';

/**
 * Browsers label cross-site requests; SameSite=Strict already keeps the cookies off them, and
 * this refuses them before the body is even read.
 */
export function isCrossSite(req: NodeRequest): boolean {
  return req.headers['sec-fetch-site'] === 'cross-site';
}

/** Whether a signed-in POST carries its session's CSRF token, in the X-CSRF-Token header or the `_csrf` field. */
export function csrfPresented(req: NodeRequest, session: SessionContext, form: FormFields): boolean {
  const presented = requestHeader(req, 'x-csrf-token') ?? (form.has('_csrf') ? form.get('_csrf') : undefined);
  return csrfTokenMatches(session, presented);
}
