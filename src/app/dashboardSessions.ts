import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { DomainError } from '../domain/errors.js';
import { writeTxn } from '../store/db.js';
import type { DashboardUser } from '../store/dashboardUsers.js';
import type { AppDeps } from './deps.js';
import { verifyPassword } from './dashboardPasswords.js';
import { normalizeEmail } from './dashboardUsers.js';

/** A session lasts this long from sign-in, however active; then the user signs in again. */
export const SESSION_TTL_MS = 12 * 3600_000;
/** Failed sign-ins per email allowed inside one window before the email is locked. */
export const MAX_FAILED_SIGN_INS = 5;
/** Length of the failure-counting window, and of the lockout that follows. */
export const LOCKOUT_MS = 15 * 60_000;

const TOKEN = /^[A-Za-z0-9_-]{43}$/;

// One message for unknown email, wrong password and disabled user, so none can be told apart.
function invalidCredentials(): DomainError {
  return new DomainError('unauthenticated', 'Invalid email or password', { code: 'invalid_credentials' });
}

function locked(): DomainError {
  return new DomainError('unauthenticated', `Too many failed sign-ins for this email; try again in ${LOCKOUT_MS / 60_000} minutes`, {
    code: 'sign_in_locked',
  });
}

function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** A signed-in request's user and the secrets of its session (never the session token itself). */
export type SessionContext = { user: DashboardUser; csrfToken: string; expiresAt: number; tokenHash: Buffer };

export type SignInResult = SessionContext & { token: string };

/**
 * Email and password → a new session. Each attempt is counted before the password is checked, so
 * parallel guesses cannot all slip in ahead of the lockout: at most MAX_FAILED_SIGN_INS checks
 * per email per window, then LOCKOUT_MS of refusals. Success clears the count.
 */
export async function signIn(deps: AppDeps, input: { email: string; password: string }): Promise<SignInResult> {
  let email: string;
  try {
    email = normalizeEmail(input.email);
  } catch {
    throw invalidCredentials();
  }
  const { loginFailures, dashboardUsers, dashboardSessions } = deps.store;
  const attempt = writeTxn(deps.store.db, () => {
    const now = deps.now();
    const row = loginFailures.get(email);
    if (row && row.lockedUntil > now) return 'locked' as const;
    const fresh = !row || row.windowStart <= now - LOCKOUT_MS;
    const failures = (fresh ? 0 : row.failures) + 1;
    if (failures > MAX_FAILED_SIGN_INS) {
      loginFailures.put({ email, failures: 0, windowStart: now, lockedUntil: now + LOCKOUT_MS });
      return 'locked' as const;
    }
    loginFailures.put({ email, failures, windowStart: fresh ? now : row.windowStart, lockedUntil: 0 });
    return failures;
  });
  if (attempt === 'locked') throw locked();

  const found = dashboardUsers.findForSignIn(email);
  const ok = await verifyPassword(input.password, found?.password);
  if (!ok || !found || found.user.disabled) {
    if (attempt < MAX_FAILED_SIGN_INS) throw invalidCredentials();
    writeTxn(deps.store.db, () => {
      const now = deps.now();
      loginFailures.put({ email, failures: 0, windowStart: now, lockedUntil: now + LOCKOUT_MS });
      loginFailures.prune(now - LOCKOUT_MS, now);
    });
    throw locked();
  }

  const token = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(32).toString('base64url');
  const tokenHash = hashToken(token);
  return writeTxn(deps.store.db, () => {
    const now = deps.now();
    loginFailures.clear(email);
    dashboardSessions.deleteExpired(now);
    const expiresAt = now + SESSION_TTL_MS;
    dashboardSessions.insert({ tokenHash, userId: found.user.id, csrfToken, createdAt: now, expiresAt });
    return { user: found.user, token, csrfToken, expiresAt, tokenHash };
  });
}

/** The session a cookie's token stands for, or undefined when unknown, expired or the user is disabled. */
export function authenticateSession(deps: AppDeps, token: string | undefined): SessionContext | undefined {
  if (token === undefined || !TOKEN.test(token)) return undefined;
  const tokenHash = hashToken(token);
  const session = deps.store.dashboardSessions.get(tokenHash);
  if (!session || !timingSafeEqual(session.tokenHash, tokenHash) || session.expiresAt <= deps.now()) return undefined;
  const user = deps.store.dashboardUsers.get(session.userId);
  if (!user || user.disabled) return undefined;
  return { user, csrfToken: session.csrfToken, expiresAt: session.expiresAt, tokenHash };
}

/** Ends a session; signing out twice is harmless. */
export function signOut(deps: AppDeps, session: Pick<SessionContext, 'tokenHash'>): void {
  writeTxn(deps.store.db, () => deps.store.dashboardSessions.delete(session.tokenHash));
}

/** Constant-time comparison of a presented CSRF token with the session's. */
export function csrfTokenMatches(session: Pick<SessionContext, 'csrfToken'>, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const a = Buffer.from(presented, 'utf8');
  const b = Buffer.from(session.csrfToken, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}
