import { afterAll, beforeAll, expect, test } from 'vitest';
import { MAX_FAILED_SIGN_INS } from '../../src/app/accounts/dashboardSessions.js';
import { createUser, dashboardFetch, signInForm, type HttpSession } from '../dashboard/helpers.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * Dashboard sessions and sign-in lockouts whichever replica serves a request: the sign-in
 * form fetched from one replica is posted to another, the session it opens works on every replica,
 * sign-out on one ends it on all, and failed sign-ins spread over the replicas lock the email on all.
 */

const PASSWORD = 'correct horse battery staple 42';
let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ replicas: 3 });
}, 120_000);
afterAll(async () => c?.close(), 60_000);

const url = (i: number) => c.replicas[i % 3]!.url;

/** The form from replica `from`, posted to replica `to`. */
async function signIn(from: number, to: number, email: string, password: string): Promise<Response> {
  const form = await signInForm(url(from));
  return fetch(`${url(to)}/dashboard/sign-in`, {
    method: 'POST', redirect: 'manual',
    headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded', connection: 'close' },
    body: new URLSearchParams({ _csrf: form.token, email, password }),
  });
}

test('a session opened on one replica works on every replica, and ends on all at sign-out', async () => {
  await createUser(c.admin(0), c.bootstrap.org_id, 'owner@example.com', 'owner', PASSWORD);
  const r = await signIn(0, 1, 'owner@example.com', PASSWORD);
  expect(r.status, await r.clone().text()).toBe(303);
  const cookie = r.headers.getSetCookie().find((x) => x.startsWith('pp_session='))!.split(';')[0]!;
  const pages: string[] = [];
  for (let i = 0; i < 3; i++) {
    const page = await dashboardFetch(url(i), { cookie, csrf: '' }, '/dashboard/agents');
    expect(page.status).toBe(200);
    pages.push(await page.text());
  }
  const csrf = /name="_csrf" value="([^"]+)"/.exec(pages[2]!)![1]!;
  const session: HttpSession = { cookie, csrf };
  // Signed out on replica 2: replicas 0 and 1 send the browser to sign in.
  const out = await dashboardFetch(url(2), session, '/dashboard/sign-out', { form: { _csrf: csrf } });
  expect(out.status).toBe(303);
  for (const i of [0, 1]) {
    const page = await dashboardFetch(url(i), session, '/dashboard/agents');
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toMatch(/sign-in/);
  }
}, 60_000);

test('failed sign-ins spread over the replicas lock the email on every replica', async () => {
  await createUser(c.admin(1), c.bootstrap.org_id, 'target@example.com', 'viewer', PASSWORD);
  for (let i = 0; i < MAX_FAILED_SIGN_INS; i++) {
    const r = await signIn(i, i + 1, 'target@example.com', `wrong ${i}`);
    expect([200, 401, 403, 429]).toContain(r.status);
    expect(r.status).not.toBe(303);
  }
  // Locked everywhere: even the right password opens no session, on any replica.
  for (let i = 0; i < 3; i++) {
    const r = await signIn(i, i, 'target@example.com', PASSWORD);
    expect(r.status).not.toBe(303);
    expect(r.headers.getSetCookie().some((x) => x.startsWith('pp_session='))).toBe(false);
    expect(await r.text()).toMatch(/locked|too many/i);
  }
}, 60_000);
