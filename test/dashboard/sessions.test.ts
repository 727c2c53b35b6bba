import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { ROLE_PERMISSIONS, roleAllows } from '../../src/app/dashboardRoles.js';
import {
  LOCKOUT_MS, MAX_FAILED_SIGN_INS, SESSION_TTL_MS, authenticateSession, csrfTokenMatches, signIn, signOut,
} from '../../src/app/accounts/dashboardSessions.js';
import { createDashboardUser, listDashboardUsers } from '../../src/app/accounts/dashboardUsers.js';
import type { AppDeps } from '../../src/app/deps.js';
import { createOrganization } from '../../src/app/organizations/organizations.js';
import { DomainError } from '../../src/domain/errors.js';
import { OPERATOR } from '../../src/domain/types.js';
import { openStore, type Store } from '../../src/store/store.js';
import { testDeps } from '../helpers/testDeps.js';

/**
 * Dashboard users, sessions and the sign-in lockout against a fresh database file, with the
 * clock injected so expiry and lockout are tested without waiting.
 */

const PASSWORD = 'correct horse battery';
const ADDRESS = '192.0.2.1';
let dir: string;
let store: Store;
let clock: number;
let deps: AppDeps;
let orgId: string;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'paypolicy-dash-'));
  store = openStore(join(dir, 'db.sqlite'));
  clock = Date.parse('2030-01-01T00:00:00Z');
  deps = testDeps(store, { now: () => clock });
  orgId = (await createOrganization(deps, OPERATOR, { name: 'acme' })).id;
  await createDashboardUser(deps, OPERATOR, { orgId, email: ' Owner@Example.COM ', role: 'owner', password: PASSWORD });
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

async function refusal(p: Promise<unknown>): Promise<DomainError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return err as DomainError;
  }
  throw new Error('expected a DomainError');
}

describe('createDashboardUser', () => {
  test('behavior: email lower-cased and trimmed; no password material in what comes back', async () => {
    const [user] = await listDashboardUsers(deps, OPERATOR, orgId);
    expect(user).toEqual({ id: expect.stringMatching(/^usr_[0-9a-f]{24}$/), orgId, email: 'owner@example.com', role: 'owner', createdAt: clock, disabled: false });
  });

  test('error: conflict for an email that exists, in any case', async () => {
    const e = await refusal(createDashboardUser(deps, OPERATOR, { orgId, email: 'OWNER@example.com', role: 'viewer', password: PASSWORD }));
    expect([e.kind, e.code]).toEqual(['conflict', 'dashboard_user_exists']);
  });

  test('error: invalid_argument for a short password, a bad role or a bad email; not_found for an unknown organization', async () => {
    expect((await refusal(createDashboardUser(deps, OPERATOR, { orgId, email: 'a@example.com', role: 'viewer', password: 'short' }))).shortMessage).toMatch(/at least 12/);
    expect((await refusal(createDashboardUser(deps, OPERATOR, { orgId, email: 'a@example.com', role: 'admin', password: PASSWORD }))).shortMessage).toMatch(/role must be/);
    expect((await refusal(createDashboardUser(deps, OPERATOR, { orgId, email: 'not-an-email', role: 'viewer', password: PASSWORD }))).shortMessage).toMatch(/email/);
    expect((await refusal(createDashboardUser(deps, OPERATOR, { orgId: 'org_000000000000', email: 'a@example.com', role: 'viewer', password: PASSWORD }))).kind).toBe('not_found');
  });
});

describe('signIn', () => {
  test('behavior: a session whose token is stored only as its SHA-256, with its own CSRF token', async () => {
    const s = await signIn(deps, { email: 'OWNER@example.com', password: PASSWORD, clientAddress: ADDRESS });
    expect(s.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(s.csrfToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(s.expiresAt).toBe(clock + SESSION_TTL_MS);
    const rows = store.db.prepare('SELECT token_hash FROM dashboard_sessions').all() as { token_hash: Buffer }[];
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash.equals(createHash('sha256').update(s.token).digest())).toBe(true);
    expect((await authenticateSession(deps, s.token))?.user.email).toBe('owner@example.com');
  });

  test('error: unknown email and wrong password get the same unauthenticated answer', async () => {
    const unknown = await refusal(signIn(deps, { email: 'nobody@example.com', password: PASSWORD, clientAddress: ADDRESS }));
    const wrong = await refusal(signIn(deps, { email: 'owner@example.com', password: 'wrong password!', clientAddress: ADDRESS }));
    const malformed = await refusal(signIn(deps, { email: 'not an email', password: PASSWORD, clientAddress: ADDRESS }));
    for (const e of [unknown, wrong, malformed]) expect([e.kind, e.code, e.shortMessage]).toEqual(['unauthenticated', 'invalid_credentials', 'Invalid email or password']);
  });

  test('error: a disabled user cannot sign in, and their open session stops working', async () => {
    const s = await signIn(deps, { email: 'owner@example.com', password: PASSWORD, clientAddress: ADDRESS });
    store.db.prepare('UPDATE dashboard_users SET disabled = 1').run();
    expect(await authenticateSession(deps, s.token)).toBeUndefined();
    expect((await refusal(signIn(deps, { email: 'owner@example.com', password: PASSWORD, clientAddress: ADDRESS }))).code).toBe('invalid_credentials');
  });

  test('error: locked after five failures within 15 minutes, even with the right password; unlocked 15 minutes later', async () => {
    for (let i = 1; i < MAX_FAILED_SIGN_INS; i++) expect((await refusal(signIn(deps, { email: 'owner@example.com', password: `wrong ${i}`, clientAddress: ADDRESS }))).code).toBe('invalid_credentials');
    expect((await refusal(signIn(deps, { email: 'owner@example.com', password: 'wrong 5', clientAddress: ADDRESS }))).code).toBe('sign_in_locked');
    clock += 60_000;
    expect((await refusal(signIn(deps, { email: 'owner@example.com', password: PASSWORD, clientAddress: ADDRESS }))).code).toBe('sign_in_locked');
    clock += LOCKOUT_MS;
    expect((await signIn(deps, { email: 'owner@example.com', password: PASSWORD, clientAddress: ADDRESS })).user.role).toBe('owner');
  });

  test('behavior: failures spread over more than 15 minutes do not lock; a success resets the count', async () => {
    for (let i = 0; i < 4; i++) await refusal(signIn(deps, { email: 'owner@example.com', password: 'wrong', clientAddress: ADDRESS }));
    clock += LOCKOUT_MS + 1;
    for (let i = 0; i < 4; i++) expect((await refusal(signIn(deps, { email: 'owner@example.com', password: 'wrong', clientAddress: ADDRESS }))).code).toBe('invalid_credentials');
    await signIn(deps, { email: 'owner@example.com', password: PASSWORD, clientAddress: ADDRESS });
    for (let i = 0; i < 4; i++) expect((await refusal(signIn(deps, { email: 'owner@example.com', password: 'wrong', clientAddress: ADDRESS }))).code).toBe('invalid_credentials');
  });

  test('behavior: unknown emails are locked the same way, so a lockout reveals nothing about accounts', async () => {
    const codes = [];
    for (let i = 0; i < 6; i++) codes.push((await refusal(signIn(deps, { email: 'ghost@example.com', password: 'guess', clientAddress: ADDRESS }))).code);
    expect(codes).toEqual(['invalid_credentials', 'invalid_credentials', 'invalid_credentials', 'invalid_credentials', 'sign_in_locked', 'sign_in_locked']);
  });

  test('behavior: parallel guesses are counted before checking, so at most five are ever checked', async () => {
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => signIn(deps, { email: 'owner@example.com', password: `guess ${i}`, clientAddress: ADDRESS })));
    const codes = results.map((r) => (r.status === 'rejected' ? (r.reason as DomainError).code : 'ok'));
    expect(codes.filter((c) => c === 'invalid_credentials').length).toBeLessThanOrEqual(MAX_FAILED_SIGN_INS - 1);
    expect(codes.filter((c) => c === 'sign_in_locked').length).toBeGreaterThanOrEqual(12 - MAX_FAILED_SIGN_INS);
    expect(codes).not.toContain('ok');
  });
});

describe('authenticateSession', () => {
  test('behavior: valid until the TTL, then gone; malformed and unknown tokens are undefined', async () => {
    const s = await signIn(deps, { email: 'owner@example.com', password: PASSWORD, clientAddress: ADDRESS });
    clock += SESSION_TTL_MS - 1;
    expect(await authenticateSession(deps, s.token)).toBeDefined();
    clock += 1;
    expect(await authenticateSession(deps, s.token)).toBeUndefined();
    expect(await authenticateSession(deps, undefined)).toBeUndefined();
    expect(await authenticateSession(deps, 'short')).toBeUndefined();
    expect(await authenticateSession(deps, 'A'.repeat(43))).toBeUndefined();
  });
});

describe('signOut', () => {
  test('behavior: deletes the session row; the token no longer authenticates', async () => {
    const s = await signIn(deps, { email: 'owner@example.com', password: PASSWORD, clientAddress: ADDRESS });
    await signOut(deps, s);
    expect(await authenticateSession(deps, s.token)).toBeUndefined();
    expect(store.db.prepare('SELECT COUNT(*) AS n FROM dashboard_sessions').get()).toEqual({ n: 0 });
  });
});

describe('csrfTokenMatches', () => {
  test('behavior: only the exact token of the session matches', async () => {
    const s = await signIn(deps, { email: 'owner@example.com', password: PASSWORD, clientAddress: ADDRESS });
    expect(csrfTokenMatches(s, s.csrfToken)).toBe(true);
    expect(csrfTokenMatches(s, undefined)).toBe(false);
    expect(csrfTokenMatches(s, '')).toBe(false);
    expect(csrfTokenMatches(s, `${s.csrfToken}x`)).toBe(false);
    expect(csrfTokenMatches(s, s.csrfToken.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')))).toBe(false);
  });
});

describe('roleAllows', () => {
  test('behavior: owner everything, approver reads and decides, viewer only reads', () => {
    expect(ROLE_PERMISSIONS).toEqual({ owner: ['read', 'decide', 'manage'], approver: ['read', 'decide'], viewer: ['read'] });
    expect(roleAllows('viewer', 'decide')).toBe(false);
    expect(roleAllows('approver', 'manage')).toBe(false);
    expect(roleAllows('approver', 'decide')).toBe(true);
    expect(roleAllows('owner', 'manage')).toBe(true);
  });
});
