import * as grpc from '@grpc/grpc-js';
import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { toJsonString, type DescMessage, type MessageInitShape } from '@bufbuild/protobuf';
import { AdminService, DashboardRole, ListDashboardUsersResponseSchema } from '../../gen/paypolicy/v1/admin_pb.js';
import { adminFor, type Admin } from '../helpers/admin.js';
import { grpcChannel, grpcUnary } from '../helpers/clients.js';
import { expectRpcError } from '../helpers/rpc.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createUser, dashboardFetch, httpSignIn, postSignIn, type HttpSession } from './helpers.js';

/**
 * Managing dashboard users after they exist: list, disable, enable, remove and password reset,
 * through AdminService (Connect and gRPC) and through the dashboard's Users page, against the real
 * server. Sessions end with disable, removal and reset; owners manage their own organization only;
 * an organization always keeps one enabled owner.
 */

const PASSWORD = 'long enough password';
const NEW_PASSWORD = 'a brand new passphrase';
let s: TestServer;
let admin: Admin;
let channel: grpc.Client;
let orgA: string;
let orgB: string;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = adminFor(s);
  channel = grpcChannel(s.url);
  orgA = (await admin.client.createOrganization({ name: 'org a' }, admin.auth)).organization!.id;
  orgB = (await admin.client.createOrganization({ name: 'org b' }, admin.auth)).organization!.id;
});
afterAll(async () => {
  channel?.close();
  await s?.close();
});

let n = 0;
/** A new user of `org` with a unique email. */
async function newUser(org: string, role: 'owner' | 'approver' | 'viewer') {
  n += 1;
  return createUser(admin, org, `${role}${n}@example.com`, role, PASSWORD);
}

/** GET a signed-in page: 200 while the session lives, a redirect to sign-in once it has ended. */
async function pageStatus(session: HttpSession, path = '/dashboard/agents'): Promise<string> {
  const r = await dashboardFetch(s.url, session, path);
  await r.arrayBuffer();
  return r.status === 303 ? `303 ${r.headers.get('location')}` : String(r.status);
}

async function signInStatus(email: string, password: string): Promise<number> {
  const r = await postSignIn(s.url, email, password);
  await r.arrayBuffer();
  return r.status;
}

const signedOut = '303 /dashboard/sign-in';

const M = AdminService.method;
/** One AdminService call over @grpc/grpc-js (h2c) with the admin token. */
function grpcCall<I extends DescMessage, O extends DescMessage>(method: { name: string; input: I; output: O }, request: MessageInitShape<I>) {
  return grpcUnary(channel, AdminService, method, request, s.bootstrap.admin_token);
}

describe('AdminService dashboard users', () => {
  test('behavior: ListDashboardUsers (Connect and gRPC) lists one organization, oldest first, without password material', async () => {
    const org = (await admin.client.createOrganization({ name: 'listed' }, admin.auth)).organization!.id;
    const a = await newUser(org, 'owner');
    const b = await newUser(org, 'viewer');
    await newUser(orgB, 'viewer');
    const viaConnect = await admin.client.listDashboardUsers({ orgId: org }, admin.auth);
    expect(viaConnect.users.map((u) => [u.id, u.email, u.role, u.disabled])).toEqual([
      [a.id, a.email, DashboardRole.OWNER, false], [b.id, b.email, DashboardRole.VIEWER, false],
    ]);
    expect(toJsonString(ListDashboardUsersResponseSchema, viaConnect)).not.toMatch(/password|salt|hash/i);
    const viaGrpc = await grpcCall(M.listDashboardUsers, { orgId: org });
    expect(viaGrpc.ok && viaGrpc.message.users.map((u) => u.id)).toEqual([a.id, b.id]);
    await expectRpcError(admin.client.listDashboardUsers({ orgId: 'org_000000000000000000000000' }, admin.auth), Code.NotFound);
  });

  test('behavior: disabling (gRPC) refuses the live session on its next request and sign-in; enabling (Connect) lets the user back in', async () => {
    const owner = await newUser(orgA, 'owner');
    const approver = await newUser(orgA, 'approver');
    const session = await httpSignIn(s.url, approver.email, PASSWORD);
    expect(await pageStatus(session)).toBe('200');

    const disabled = await grpcCall(M.updateDashboardUser, { userId: approver.id, disabled: true });
    expect(disabled.ok && disabled.message.user?.disabled).toBe(true);
    expect(await pageStatus(session)).toBe(signedOut);
    const post = await dashboardFetch(s.url, session, '/dashboard/agents', { form: { _csrf: session.csrf, name: 'after-disable' } });
    expect(post.status).toBe(401);
    expect(await signInStatus(approver.email, PASSWORD)).toBe(401);
    const rows = s.app.store.db.prepare('SELECT count(*) AS n FROM dashboard_sessions WHERE user_id = ?').get(approver.id) as { n: number };
    expect(rows.n).toBe(0);

    const enabled = await admin.client.updateDashboardUser({ userId: approver.id, disabled: false }, admin.auth);
    expect(enabled.user).toMatchObject({ id: approver.id, disabled: false });
    expect(await signInStatus(approver.email, PASSWORD)).toBe(303);
    // Unset `disabled` changes nothing.
    expect((await admin.client.updateDashboardUser({ userId: owner.id }, admin.auth)).user?.disabled).toBe(false);
  });

  test('behavior: ResetDashboardUserPassword (gRPC) ends every session; the old password fails and the new one works', async () => {
    const viewer = await newUser(orgA, 'viewer');
    const [one, two] = [await httpSignIn(s.url, viewer.email, PASSWORD), await httpSignIn(s.url, viewer.email, PASSWORD)];
    const r = await grpcCall(M.resetDashboardUserPassword, { userId: viewer.id, password: NEW_PASSWORD });
    expect(r.ok).toBe(true);
    expect([await pageStatus(one), await pageStatus(two)]).toEqual([signedOut, signedOut]);
    expect(await signInStatus(viewer.email, PASSWORD)).toBe(401);
    expect(await signInStatus(viewer.email, NEW_PASSWORD)).toBe(303);
    await expectRpcError(admin.client.resetDashboardUserPassword({ userId: viewer.id, password: 'short' }, admin.auth), Code.InvalidArgument, /at least 12/);
  });

  test('behavior: DeleteDashboardUser (Connect) removes the user and their sessions; the id is then unknown', async () => {
    const viewer = await newUser(orgA, 'viewer');
    const session = await httpSignIn(s.url, viewer.email, PASSWORD);
    await admin.client.deleteDashboardUser({ userId: viewer.id }, admin.auth);
    expect(await pageStatus(session)).toBe(signedOut);
    expect((await admin.client.listDashboardUsers({ orgId: orgA }, admin.auth)).users.map((u) => u.id)).not.toContain(viewer.id);
    expect(await signInStatus(viewer.email, PASSWORD)).toBe(401);
    await expectRpcError(admin.client.deleteDashboardUser({ userId: viewer.id }, admin.auth), Code.NotFound, /Dashboard user not found/);
    const viaGrpc = await grpcCall(M.deleteDashboardUser, { userId: 'nope' });
    expect(!viaGrpc.ok && viaGrpc.code).toBe(grpc.status.NOT_FOUND);
  });

  test('error: failed_precondition: the last enabled owner cannot be disabled or removed; with a second owner they can', async () => {
    const org = (await admin.client.createOrganization({ name: 'one owner' }, admin.auth)).organization!.id;
    const first = await newUser(org, 'owner');
    await newUser(org, 'approver');
    await expectRpcError(admin.client.updateDashboardUser({ userId: first.id, disabled: true }, admin.auth), Code.FailedPrecondition, /last enabled owner/);
    await expectRpcError(admin.client.deleteDashboardUser({ userId: first.id }, admin.auth), Code.FailedPrecondition, /last enabled owner/);
    const viaGrpc = await grpcCall(M.deleteDashboardUser, { userId: first.id });
    expect(!viaGrpc.ok && viaGrpc.code).toBe(grpc.status.FAILED_PRECONDITION);
    // A disabled second owner does not count.
    const second = await newUser(org, 'owner');
    await admin.client.updateDashboardUser({ userId: second.id, disabled: true }, admin.auth);
    await expectRpcError(admin.client.deleteDashboardUser({ userId: first.id }, admin.auth), Code.FailedPrecondition, /last enabled owner/);
    await admin.client.updateDashboardUser({ userId: second.id, disabled: false }, admin.auth);
    await admin.client.updateDashboardUser({ userId: first.id, disabled: true }, admin.auth);
    await expectRpcError(admin.client.deleteDashboardUser({ userId: second.id }, admin.auth), Code.FailedPrecondition, /last enabled owner/);
    await admin.client.deleteDashboardUser({ userId: first.id }, admin.auth);
    const left = (await admin.client.listDashboardUsers({ orgId: org }, admin.auth)).users;
    expect(left.filter((u) => u.role === DashboardRole.OWNER).map((u) => [u.id, u.disabled])).toEqual([[second.id, false]]);
  });
});

describe('dashboard Users page', () => {
  test('behavior: an owner sees their organization\'s users and disables one: that user\'s live session is refused on its next request', async () => {
    const owner = await newUser(orgA, 'owner');
    const approver = await newUser(orgA, 'approver');
    const foreign = await newUser(orgB, 'viewer');
    const [ownerSession, approverSession] = [await httpSignIn(s.url, owner.email, PASSWORD), await httpSignIn(s.url, approver.email, PASSWORD)];
    const page = await (await dashboardFetch(s.url, ownerSession, '/dashboard/users')).text();
    expect(page).toContain(approver.email);
    expect(page).not.toContain(foreign.email);
    expect(page).toContain(`action="/dashboard/users/${approver.id}/status"`);

    const r = await dashboardFetch(s.url, ownerSession, `/dashboard/users/${approver.id}/status`, { form: { _csrf: ownerSession.csrf, disabled: 'true' } });
    expect([r.status, r.headers.get('location')]).toEqual([303, '/dashboard/users']);
    expect(await (await dashboardFetch(s.url, ownerSession, '/dashboard/users')).text()).toContain(`${approver.email} disabled and signed out.`);
    expect(await pageStatus(approverSession)).toBe(signedOut);

    const back = await dashboardFetch(s.url, ownerSession, `/dashboard/users/${approver.id}/status`, { form: { _csrf: ownerSession.csrf, disabled: 'false' } });
    expect(back.status).toBe(303);
    expect(await signInStatus(approver.email, PASSWORD)).toBe(303);
  });

  test('behavior: an owner resets a password from the form (a short one is a 400 next to the field) and removes a user', async () => {
    const owner = await newUser(orgA, 'owner');
    const viewer = await newUser(orgA, 'viewer');
    const ownerSession = await httpSignIn(s.url, owner.email, PASSWORD);
    const viewerSession = await httpSignIn(s.url, viewer.email, PASSWORD);
    const path = `/dashboard/users/${viewer.id}/password`;
    expect(await pageStatus(ownerSession, path)).toBe('200');
    const short = await dashboardFetch(s.url, ownerSession, path, { form: { _csrf: ownerSession.csrf, password: 'short' } });
    expect(short.status).toBe(400);
    expect(await short.text()).toMatch(/id="new-password-error">password must be at least 12 characters/);
    expect(await pageStatus(viewerSession)).toBe('200');

    const reset = await dashboardFetch(s.url, ownerSession, path, { form: { _csrf: ownerSession.csrf, password: NEW_PASSWORD } });
    expect(reset.status).toBe(303);
    expect(await pageStatus(viewerSession)).toBe(signedOut);
    expect(await signInStatus(viewer.email, NEW_PASSWORD)).toBe(303);

    const removed = await dashboardFetch(s.url, ownerSession, `/dashboard/users/${viewer.id}/remove`, { form: { _csrf: ownerSession.csrf } });
    expect(removed.status).toBe(303);
    expect((await admin.client.listDashboardUsers({ orgId: orgA }, admin.auth)).users.map((u) => u.id)).not.toContain(viewer.id);
    expect(await pageStatus(ownerSession)).toBe('200');
  });

  test('error: not_found: an owner of organization A can neither see nor change organization B\'s users, and nothing changes', async () => {
    const ownerA = await newUser(orgA, 'owner');
    const victim = await newUser(orgB, 'owner');
    await newUser(orgB, 'owner');
    const session = await httpSignIn(s.url, ownerA.email, PASSWORD);
    const before = (await admin.client.listDashboardUsers({ orgId: orgB }, admin.auth)).users;
    const attempts = [
      dashboardFetch(s.url, session, `/dashboard/users/${victim.id}/password`),
      dashboardFetch(s.url, session, `/dashboard/users/${victim.id}/status`, { form: { _csrf: session.csrf, disabled: 'true' } }),
      dashboardFetch(s.url, session, `/dashboard/users/${victim.id}/remove`, { form: { _csrf: session.csrf } }),
      dashboardFetch(s.url, session, `/dashboard/users/${victim.id}/password`, { form: { _csrf: session.csrf, password: NEW_PASSWORD } }),
      dashboardFetch(s.url, session, '/dashboard/users/usr_000000000000000000000000/remove', { form: { _csrf: session.csrf } }),
    ];
    expect(await Promise.all(attempts.map(async (p) => (await p).status))).toEqual([404, 404, 404, 404, 404]);
    expect((await admin.client.listDashboardUsers({ orgId: orgB }, admin.auth)).users).toEqual(before);
    expect(await signInStatus(victim.email, PASSWORD)).toBe(303);
  });

  test('error: permission_denied: an approver or a viewer sees the list but cannot manage users (403), and nothing changes', async () => {
    const owner = await newUser(orgA, 'owner');
    for (const role of ['approver', 'viewer'] as const) {
      const u = await newUser(orgA, role);
      const session = await httpSignIn(s.url, u.email, PASSWORD);
      const list = await (await dashboardFetch(s.url, session, '/dashboard/users')).text();
      expect(list).toContain(owner.email);
      expect(list).not.toContain('/remove"');
      const attempts = [
        dashboardFetch(s.url, session, `/dashboard/users/${owner.id}/password`),
        dashboardFetch(s.url, session, `/dashboard/users/${owner.id}/status`, { form: { _csrf: session.csrf, disabled: 'true' } }),
        dashboardFetch(s.url, session, `/dashboard/users/${owner.id}/remove`, { form: { _csrf: session.csrf } }),
        dashboardFetch(s.url, session, `/dashboard/users/${owner.id}/password`, { form: { _csrf: session.csrf, password: NEW_PASSWORD } }),
      ];
      expect([role, ...(await Promise.all(attempts.map(async (p) => (await p).status)))]).toEqual([role, 403, 403, 403, 403]);
    }
    expect(await signInStatus(owner.email, PASSWORD)).toBe(303);
  });

  test('error: the last enabled owner cannot disable or remove themselves from the dashboard: an error flash, nothing changes', async () => {
    const org = (await admin.client.createOrganization({ name: 'solo' }, admin.auth)).organization!.id;
    const owner = await newUser(org, 'owner');
    const session = await httpSignIn(s.url, owner.email, PASSWORD);
    for (const action of ['status', 'remove']) {
      const r = await dashboardFetch(s.url, session, `/dashboard/users/${owner.id}/${action}`, { form: { _csrf: session.csrf, disabled: 'true' } });
      expect([action, r.status, r.headers.get('location')]).toEqual([action, 303, '/dashboard/users']);
      const page = await (await dashboardFetch(s.url, session, '/dashboard/users')).text();
      expect(page).toContain('This is the last enabled owner of the organization');
    }
    expect((await admin.client.listDashboardUsers({ orgId: org }, admin.auth)).users.map((u) => u.disabled)).toEqual([false]);
  });
});

describe('dashboard policy form', () => {
  test('behavior: saving a policy with an unregistered slug or a threshold above the cap saves it and lists both warnings', async () => {
    const owner = await newUser(orgA, 'owner');
    const session = await httpSignIn(s.url, owner.email, PASSWORD);
    const agentId = (await admin.client.createAgent({ orgId: orgA, name: 'form-warned' }, admin.auth)).agent!.id;
    const path = `/dashboard/agents/${agentId}/policy`;
    const form = { _csrf: session.csrf, allowlist: 'typo-svc', spend_cap_usd: '10', approval_threshold_usd: '25', max_network_fee_eth: '0' };
    const saved = await dashboardFetch(s.url, session, path, { form });
    expect([saved.status, saved.headers.get('location')]).toEqual([303, `/dashboard/agents/${agentId}`]);
    const page = await (await dashboardFetch(s.url, session, `/dashboard/agents/${agentId}`)).text();
    expect(page).toContain('Policy of form-warned saved.');
    expect(page).toContain('<li>allowlist entry &quot;typo-svc&quot; is not a registered service slug; it matches nothing until a service with that slug is registered</li>');
    expect(page).toContain('<li>approval threshold 25 USD is above the spend cap 10 USD; no payment can reach it, so none will wait for approval</li>');
    expect((await admin.client.getAgent({ agentId }, admin.auth)).agent!.policy!.allowlist).toEqual(['typo-svc']);

    // A sound policy shows no warning.
    await admin.client.upsertService({ service: { slug: 'typo-svc', name: 'Now registered', paymentMethods: [{ protocol: 'x402' }] }, orgId: orgA }, admin.auth);
    await dashboardFetch(s.url, session, path, { form: { ...form, approval_threshold_usd: '5' } });
    const clean = await (await dashboardFetch(s.url, session, `/dashboard/agents/${agentId}`)).text();
    expect(clean).toContain('Policy of form-warned saved.');
    expect(clean).not.toContain('flash-warnings');
  });
});
