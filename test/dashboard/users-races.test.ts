import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { signIn } from '../../src/app/accounts/dashboardSessions.js';
import { resetDashboardUserPassword } from '../../src/app/accounts/dashboardUsers.js';
import { MAX_ACCOUNT_HASHES_PER_ORG } from '../../src/app/accounts/auth/passwordHasher.js';
import { toDomainError } from '../../src/domain/errors.js';
import { OPERATOR, type Principal } from '../../src/domain/types.js';
import { adminFor, type Admin } from '../helpers/admin.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createUser, httpSignIn, type HttpSession } from './helpers.js';

/**
 * Offboarding races: what a dashboard user who is being disabled, removed or reset can still do
 * with a request or a sign-in that was already under way when the operator acted.
 */

const PASSWORD = 'long enough password';
let s: TestServer;
let admin: Admin;
let org: string;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = adminFor(s);
  org = (await admin.client.createOrganization({ name: 'races' }, admin.auth)).organization!.id;
});
afterAll(async () => {
  await s?.close();
});

let n = 0;
async function newUser(role: 'owner' | 'approver' | 'viewer') {
  n += 1;
  return createUser(admin, org, `race-${role}${n}@example.com`, role, PASSWORD);
}

/**
 * Starts a dashboard form POST whose body is held back: resolves once the server has answered
 * `100 Continue`, i.e. once it has taken the request (and read its session). `finish` sends the
 * body and resolves with the status of the answer.
 */
function heldPost(session: HttpSession, path: string, form: Record<string, string>): Promise<{ finish: () => Promise<number> }> {
  const { hostname, port } = new URL(s.url);
  const body = new URLSearchParams(form).toString();
  const head = [
    `POST ${path} HTTP/1.1`, `host: ${hostname}:${port}`, `cookie: ${session.cookie}`, 'content-type: application/x-www-form-urlencoded',
    `content-length: ${Buffer.byteLength(body)}`, 'expect: 100-continue', 'connection: close', '', '',
  ].join('\r\n');
  return new Promise((resolveHeld, rejectHeld) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    let data = '';
    let answered: (status: number) => void = () => {};
    const status = new Promise<number>((r) => (answered = r));
    socket.on('connect', () => socket.write(head));
    socket.on('error', rejectHeld);
    socket.on('data', (chunk: Buffer) => {
      data += chunk.toString('latin1');
      if (data.startsWith('HTTP/1.1 100')) {
        const end = data.indexOf('\r\n\r\n');
        if (end < 0) return;
        data = data.slice(end + 4);
        resolveHeld({ finish: () => (socket.write(body), status) });
        return;
      }
      const m = /^HTTP\/1\.1 (\d{3})/.exec(data);
      if (m) {
        answered(Number(m[1]));
        socket.destroy();
      }
    });
  });
}

describe('dashboard users: requests and sign-ins in flight when a user is offboarded', () => {
  test('attack: a POST whose body arrives after its owner was disabled is refused and creates no API key', async () => {
    await newUser('owner');
    const leaving = await newUser('owner');
    const session = await httpSignIn(s.url, leaving.email, PASSWORD);
    const keysBefore = (await admin.client.listApiKeys({ orgId: org }, admin.auth)).apiKeys.length;

    const held = await heldPost(session, '/dashboard/keys', { _csrf: session.csrf, label: 'kept after offboarding', mode: 'test' });
    await admin.client.updateDashboardUser({ userId: leaving.id, disabled: true }, admin.auth);
    expect(await held.finish()).toBe(401);
    expect((await admin.client.listApiKeys({ orgId: org }, admin.auth)).apiKeys.length).toBe(keysBefore);
  });

  test('attack: a POST whose body arrives after its user was removed is refused and decides nothing', async () => {
    await newUser('owner');
    const leaving = await newUser('owner');
    const victim = await newUser('viewer');
    const session = await httpSignIn(s.url, leaving.email, PASSWORD);

    const held = await heldPost(session, `/dashboard/users/${victim.id}/remove`, { _csrf: session.csrf });
    await admin.client.deleteDashboardUser({ userId: leaving.id }, admin.auth);
    expect(await held.finish()).toBe(401);
    const users = (await admin.client.listDashboardUsers({ orgId: org }, admin.auth)).users.map((u) => u.id);
    expect(users).toContain(victim.id);
  });

  test('attack: a sign-in with the old password that was being checked while the password was reset gets no session', async () => {
    const user = await newUser('viewer');
    // The sign-in reads the stored hash, then checks the password on the hasher; the reset commits
    // in between (its own hash starts first, so its write lands while the sign-in is checking).
    const reset = admin.client.resetDashboardUserPassword({ userId: user.id, password: 'a brand new passphrase' }, admin.auth);
    const attempts: Promise<unknown>[] = [];
    // Sign-ins with the old password keep starting until the reset has committed.
    let resetDone = false;
    void reset.then(() => (resetDone = true));
    while (!resetDone) {
      attempts.push(signIn(s.app.deps, { email: user.email, password: PASSWORD, clientAddress: '127.0.0.1' }).catch((e: unknown) => e));
      await new Promise<void>((r) => setImmediate(r));
    }
    await Promise.all(attempts);
    const rows = s.app.store.db.prepare('SELECT count(*) AS n FROM dashboard_sessions WHERE user_id = ?').get(user.id) as { n: number };
    expect(rows.n).toBe(0);
  });

  test('attack: two owners disabling each other at the same moment leave one enabled owner', async () => {
    const [a, b] = [await newUser('owner'), await newUser('owner')];
    // Every other owner of the organization is disabled first, so these two are the last.
    for (const u of (await admin.client.listDashboardUsers({ orgId: org }, admin.auth)).users) {
      if (u.id !== a.id && u.id !== b.id && !u.disabled && u.role === 1) await admin.client.updateDashboardUser({ userId: u.id, disabled: true }, admin.auth).catch(() => {});
    }
    const [sa, sb] = [await httpSignIn(s.url, a.email, PASSWORD), await httpSignIn(s.url, b.email, PASSWORD)];
    const [ha, hb] = [
      await heldPost(sa, `/dashboard/users/${b.id}/status`, { _csrf: sa.csrf, disabled: 'true' }),
      await heldPost(sb, `/dashboard/users/${a.id}/status`, { _csrf: sb.csrf, disabled: 'true' }),
    ];
    await Promise.all([ha.finish(), hb.finish()]);
    const owners = (await admin.client.listDashboardUsers({ orgId: org }, admin.auth)).users.filter((u) => u.role === 1 && !u.disabled);
    expect(owners.length).toBe(1);
  });
});

describe('password resets in a loop', () => {
  test('error: one organization\'s owner holds at most its share of the hashing line; the next reset is refused overloaded, the operator\'s is not', async () => {
    const owner = await newUser('owner');
    const viewer = await newUser('viewer');
    const principal = { kind: 'dashboard_user', orgId: org, userId: owner.id, email: owner.email, role: 'owner' } as const;
    const reset = (p: Principal) => resetDashboardUserPassword(s.app.deps, p, { userId: viewer.id, password: 'a fresh long password' });
    const results = await Promise.allSettled([1, 2, 3, 4].map(() => reset(principal)));
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [toDomainError(r.reason)] : []));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_ACCOUNT_HASHES_PER_ORG);
    expect(refused.map((e) => [e.kind, e.shortMessage])).toEqual([1, 2].map(() => ['overloaded', 'Server overloaded (password changes in flight for this organization); retry shortly']));
    // The operator's resets never wait for a share.
    expect((await Promise.all([1, 2, 3].map(() => reset(OPERATOR)))).map((u) => u.id)).toEqual([viewer.id, viewer.id, viewer.id]);
  });
});
