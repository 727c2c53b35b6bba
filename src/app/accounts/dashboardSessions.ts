import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { hasRoomForSignIn, PasswordHasherBusyError } from './auth/passwordHasher.js';
import { DomainError } from '../../domain/errors.js';
import type { DashboardUser, DashboardUserPrincipal } from '../../domain/types.js';
import type { LoginFailures, PasswordRecord, StoreTables } from '../../store/port.js';
import type { AppDeps } from '../deps.js';
import { verifyPassword } from './dashboardPasswords.js';
import { normalizeEmail } from './dashboardUsers.js';

/** A session lasts this long from sign-in, however active; then the user signs in again. */
export const SESSION_TTL_MS = 12 * 3600_000;
/** Failed sign-ins per email allowed inside one window before the email is locked. */
export const MAX_FAILED_SIGN_INS = 5;
/**
 * Failed sign-ins per client address (an IPv4 address, or an IPv6 /64) allowed inside one window
 * before the address is locked. Behind a reverse proxy every client has the proxy's address, so
 * this limit is shared by everyone who signs in through it.
 */
export const MAX_FAILED_SIGN_INS_PER_ADDRESS = 20;
/** Length of the failure-counting window, and of the lockout that follows. */
export const LOCKOUT_MS = 15 * 60_000;
/** Old failure rows are pruned at most this often (on a sign-in attempt). */
export const LOGIN_FAILURE_PRUNE_MS = 60_000;
/** Most failure rows kept; beyond it the unlocked rows with the oldest windows go first. */
export const MAX_LOGIN_FAILURE_ROWS = 100_000;

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

function addressLocked(): DomainError {
  return new DomainError('unauthenticated', `Too many failed sign-ins from this network address; try again in ${LOCKOUT_MS / 60_000} minutes`, {
    code: 'sign_in_address_locked',
  });
}

function busy(): DomainError {
  return new DomainError('unauthenticated', 'Too many sign-ins at once; try again in a few seconds', { code: 'sign_in_busy' });
}

/**
 * The key under which a client address's failures are counted: an IPv4 address as it is (also
 * when written IPv4-mapped, ::ffff:a.b.c.d), an IPv6 address by its /64, since one host usually
 * holds a whole /64. Never contains '@', so it cannot collide with an email's row.
 */
export function signInAddressKey(remoteAddress: string | undefined): string {
  const address = (remoteAddress ?? '').split('%')[0]!.toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped) return `address ${mapped[1]}`;
  if (isIP(address) !== 6) return `address ${address || 'unknown'}`;
  return `address ${expandIPv6(address).slice(0, 4).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address, as lower-case hex without leading zeros. */
function expandIPv6(address: string): string[] {
  let text = address;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') as [string, string] : [text, undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.map((g) => parseInt(g, 16).toString(16));
}

type Count = { locked: boolean; row: LoginFailures | undefined; reachedMax: boolean };

/**
 * The next state of one failure counter if this attempt counts against it: locked (and, when the
 * attempt just crossed the limit, the row that starts the lockout), or the row with one more.
 */
function nextCount(row: LoginFailures | undefined, key: string, max: number, now: number): Count {
  if (row && row.lockedUntil > now) return { locked: true, row: undefined, reachedMax: true };
  const fresh = !row || row.windowStart <= now - LOCKOUT_MS;
  const failures = (fresh ? 0 : row.failures) + 1;
  if (failures > max) return { locked: true, row: { email: key, failures: 0, windowStart: now, lockedUntil: now + LOCKOUT_MS }, reachedMax: true };
  return { locked: false, row: { email: key, failures, windowStart: fresh ? now : row.windowStart, lockedUntil: 0 }, reachedMax: failures === max };
}

/** When each running app last pruned, keyed by its sign requests in flight (signsInFlight.ts, shared by every withinWrite view of its deps). */
const lastPruned = new WeakMap<object, number>();

/** Prunes old failure rows at most every LOGIN_FAILURE_PRUNE_MS, inside the caller's transaction `tx`. */
async function pruneLoginFailures(deps: AppDeps, tx: StoreTables, now: number): Promise<void> {
  const last = lastPruned.get(deps.inflight);
  if (last !== undefined && now - last < LOGIN_FAILURE_PRUNE_MS && now >= last) return;
  lastPruned.set(deps.inflight, now);
  await tx.loginFailures.prune(now - LOCKOUT_MS, now, MAX_LOGIN_FAILURE_ROWS);
}

function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** A signed-in request's user and the secrets of its session (never the session token itself). */
export type SessionContext = { user: DashboardUser; csrfToken: string; expiresAt: number; tokenHash: Buffer };

export type SignInResult = SessionContext & { token: string };

/**
 * Email and password → a new session. Each attempt is counted, against the email and against the
 * client's address, before the password is checked, so parallel guesses cannot all slip in ahead
 * of a lockout: at most MAX_FAILED_SIGN_INS checks per email and MAX_FAILED_SIGN_INS_PER_ADDRESS
 * per address per window, then LOCKOUT_MS of refusals. Success clears the email's count and gives
 * the address back its attempt. When the password-hashing queue is full the attempt is refused at
 * once (sign_in_busy) and counted against nobody.
 */
export async function signIn(deps: AppDeps, input: { email: string; password: string; clientAddress: string | undefined }): Promise<SignInResult> {
  let email: string;
  try {
    email = normalizeEmail(input.email);
  } catch {
    throw invalidCredentials();
  }
  const addressKey = signInAddressKey(input.clientAddress);
  // The password check, started inside the counting write once it has room (below).
  let checking: { found: { user: DashboardUser; password: PasswordRecord } | undefined; ok: Promise<boolean> } | undefined;
  const attempt = await deps.uow.write(async (tx) => {
    const { loginFailures } = tx;
    const now = deps.now();
    await pruneLoginFailures(deps, tx, now);
    const byAddress = nextCount(await loginFailures.get(addressKey), addressKey, MAX_FAILED_SIGN_INS_PER_ADDRESS, now);
    const byEmail = nextCount(await loginFailures.get(email), email, MAX_FAILED_SIGN_INS, now);
    if (byAddress.locked || byEmail.locked) {
      if (byAddress.locked && byAddress.row) await loginFailures.put(byAddress.row);
      if (byEmail.locked && byEmail.row) await loginFailures.put(byEmail.row);
      return byEmail.locked ? ('locked' as const) : ('address_locked' as const);
    }
    const found = await tx.dashboardUsers.findForSignIn(email);
    // Nothing is counted when the hash would be refused. The hash is queued right after the room
    // check, with no await in between, so the room seen here is still there; sign-in hashes are
    // queued only inside these serialized writes. Its answer is read only once this count is
    // durable, so a guess is always counted before it can learn anything; queued once, should the
    // write run again.
    if (!hasRoomForSignIn()) return 'busy' as const;
    if (!checking) {
      checking = { found, ok: verifyPassword(input.password, found?.password) };
      checking.ok.catch(() => undefined);
    }
    await loginFailures.put(byAddress.row!);
    await loginFailures.put(byEmail.row!);
    return { emailAtMax: byEmail.reachedMax, addressAtMax: byAddress.reachedMax };
  }, { alone: true });
  if (attempt === 'locked') throw locked();
  if (attempt === 'address_locked') throw addressLocked();
  if (attempt === 'busy') throw busy();

  const { found } = checking!;
  let ok: boolean;
  try {
    ok = await checking!.ok;
  } catch (err) {
    if (err instanceof PasswordHasherBusyError) throw busy();
    throw err;
  }
  if (!ok || !found || found.user.disabled) {
    if (!attempt.emailAtMax && !attempt.addressAtMax) throw invalidCredentials();
    await deps.uow.write(async (tx) => {
      const now = deps.now();
      const lock = (key: string) => tx.loginFailures.put({ email: key, failures: 0, windowStart: now, lockedUntil: now + LOCKOUT_MS });
      if (attempt.emailAtMax) await lock(email);
      if (attempt.addressAtMax) await lock(addressKey);
    }, { alone: true });
    throw attempt.emailAtMax ? locked() : addressLocked();
  }

  const token = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(32).toString('base64url');
  const tokenHash = hashToken(token);
  return deps.uow.write(async (tx) => {
    const { loginFailures, dashboardSessions } = tx;
    // The password was checked against the record read before the (slow) hash: a reset, disable
    // or removal that committed meanwhile must not be undone by a session made from the old one.
    const current = await tx.dashboardUsers.findForSignIn(email);
    if (!current || current.user.id !== found.user.id || current.user.disabled || !samePassword(current.password, found.password)) throw invalidCredentials();
    const now = deps.now();
    await loginFailures.clear(email);
    // A success is not a failure: the address gets its attempt back (a person who signs in
    // successfully now and then cannot reset the address's count further than that).
    const row = await loginFailures.get(addressKey);
    if (row && row.lockedUntil <= now && row.failures > 0) await loginFailures.put({ ...row, failures: row.failures - 1 });
    await dashboardSessions.deleteExpired(now);
    const expiresAt = now + SESSION_TTL_MS;
    await dashboardSessions.insert({ tokenHash, userId: found.user.id, csrfToken, createdAt: now, expiresAt });
    return { user: found.user, token, csrfToken, expiresAt, tokenHash };
  }, { alone: true });
}

function samePassword(a: PasswordRecord, b: PasswordRecord): boolean {
  return a.params === b.params && a.salt.equals(b.salt) && a.hash.equals(b.hash);
}

/** The session a cookie's token stands for, or undefined when unknown, expired or the user is disabled. */
export async function authenticateSession(deps: AppDeps, token: string | undefined): Promise<SessionContext | undefined> {
  if (token === undefined || !TOKEN.test(token)) return undefined;
  const tokenHash = hashToken(token);
  const session = await deps.store.dashboardSessions.get(tokenHash);
  if (!session || !timingSafeEqual(session.tokenHash, tokenHash) || session.expiresAt <= deps.now()) return undefined;
  const user = await deps.store.dashboardUsers.get(session.userId);
  if (!user || user.disabled) return undefined;
  return { user, csrfToken: session.csrfToken, expiresAt: session.expiresAt, tokenHash };
}

/** The principal a signed-in user acts as: their organization, bounded by their role. */
export function sessionPrincipal(session: Pick<SessionContext, 'user'>): DashboardUserPrincipal {
  const { user } = session;
  return { kind: 'dashboard_user', orgId: user.orgId, userId: user.id, email: user.email, role: user.role };
}

/** Ends a session; signing out twice is harmless. */
export async function signOut(deps: AppDeps, session: Pick<SessionContext, 'tokenHash'>): Promise<void> {
  await deps.uow.write((tx) => tx.dashboardSessions.delete(session.tokenHash), { alone: true });
}

/** Constant-time comparison of a presented CSRF token with the session's. */
export function csrfTokenMatches(session: Pick<SessionContext, 'csrfToken'>, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const a = Buffer.from(presented, 'utf8');
  const b = Buffer.from(session.csrfToken, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}
