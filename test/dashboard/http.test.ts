import { spawn } from 'node:child_process';
import { agentStatus as agentStatusCodec, approvalStatus as approvalStatusCodec } from '../../src/protoMapping/enums.js';
import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, DashboardRole } from '../../gen/paypolicy/v1/admin_pb.js';
import { cookie } from '../../src/dashboard/http.js';
import type { NodeRequest } from '../../src/dashboard/http.js';
import { createAgent, createTenant, type Admin, type Tenant } from '../helpers/admin.js';
import { CLI } from '../helpers/cli.js';
import { connectClient } from '../helpers/clients.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { bearer, expectRpcError } from '../helpers/rpc.js';
import { rest, startTestServer, type TestServer } from '../helpers/server.js';
import { createUser, dashboardFetch, httpSignIn, postSignIn, signInForm, type HttpSession } from './helpers.js';

/**
 * The dashboard over plain HTTP against the real server: sessions, CSRF, roles, organization
 * boundaries, escaping, the CSV export, paging, the registry import, and how the first owner is
 * created (AdminService.CreateDashboardUser and `paypolicy user create`).
 */

const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';
const PASSWORD = 'long enough password';
let s: TestServer;
let admin: Admin;
let orgId: string;
let key: string;
let agentId: string;
let owner: HttpSession;
let approver: HttpSession;
let viewer: HttpSession;
let other: Tenant;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  orgId = s.bootstrap.org_id;
  key = s.bootstrap.api_key;
  agentId = s.bootstrap.agent_id;
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '1' });
  await Promise.all([
    createUser(admin, orgId, 'owner@example.com', 'owner', PASSWORD),
    createUser(admin, orgId, 'approver@example.com', 'approver', PASSWORD),
    createUser(admin, orgId, 'viewer@example.com', 'viewer', PASSWORD),
  ]);
  [owner, approver, viewer] = await Promise.all([
    httpSignIn(s.url, 'owner@example.com', PASSWORD),
    httpSignIn(s.url, 'approver@example.com', PASSWORD),
    httpSignIn(s.url, 'viewer@example.com', PASSWORD),
  ]);
  other = await createTenant(admin, 'other-org');
});
afterAll(async () => s?.close());

async function pending(amount = '2', idem?: string): Promise<string> {
  const r = await postSign(s.url, key, { agent_id: agentId, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: amount }, idem);
  expect(r.status, r.text).toBe(202);
  return r.json.approval_request_id as string;
}

async function approvalStatus(id: string): Promise<string | undefined> {
  const r = await admin.client.listApprovals({ orgId }, admin.auth);
  return approvalStatusCodec.fromProto(r.approvals.find((a) => a.id === id)!.status);
}

const SECURITY = {
  'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

describe('dashboard responses', () => {
  test('behavior: every kind of response carries the security headers; pages and data are never cached', async () => {
    for (const path of ['/dashboard/agents', '/dashboard/approvals.json', '/dashboard/transactions.csv', '/dashboard/static/dashboard.css', '/dashboard/static/dashboard.js', '/dashboard']) {
      const r = await dashboardFetch(s.url, owner, path);
      await r.arrayBuffer();
      for (const [name, value] of Object.entries(SECURITY)) expect(r.headers.get(name), `${path} ${name}`).toBe(value);
      if (!path.includes('/static/')) expect(r.headers.get('cache-control'), path).toBe('no-store');
    }
    const signIn = await dashboardFetch(s.url, undefined, '/dashboard/sign-in');
    expect(signIn.headers.get('x-frame-options')).toBe('DENY');
    expect(await signIn.text()).not.toMatch(/<script>|style="|onclick=/);
  });

  test('behavior: the session cookie is HttpOnly, SameSite=Strict, scoped to /dashboard; Secure only over TLS', async () => {
    const r = await postSignIn(s.url, 'owner@example.com', PASSWORD);
    const set = r.headers.getSetCookie().find((c) => c.startsWith('pp_session='))!;
    expect(set).toMatch(/; Path=\/dashboard; HttpOnly; SameSite=Strict; Max-Age=43200$/);
    const tls = { socket: { encrypted: true } } as unknown as NodeRequest;
    expect(cookie(tls, 'pp_session', 'v', 60)).toBe('pp_session=v; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=60; Secure');
  });

  test('behavior: without a session pages redirect to sign-in and data answers 401', async () => {
    const page = await dashboardFetch(s.url, undefined, '/dashboard/agents');
    expect([page.status, page.headers.get('location')]).toEqual([303, '/dashboard/sign-in']);
    const json = await dashboardFetch(s.url, undefined, '/dashboard/approvals.json');
    expect(json.status).toBe(401);
    expect(await json.json()).toEqual({ error: 'Sign in first.' });
    const forged = await dashboardFetch(s.url, { cookie: 'pp_session=' + 'A'.repeat(43), csrf: '' }, '/dashboard/agents', { form: { name: 'x' } });
    expect(forged.status).toBe(401);
  });

  test('behavior: other paths are not the dashboard\'s; unknown dashboard paths are 404; wrong methods 405', async () => {
    expect((await rest(s.url, 'GET', '/dashboardx')).status).toBe(404);
    expect((await dashboardFetch(s.url, owner, '/dashboard/nope')).status).toBe(404);
    const put = await dashboardFetch(s.url, owner, '/dashboard/agents', { method: 'PUT' });
    expect([put.status, put.headers.get('allow')]).toEqual([405, 'GET, HEAD, POST']);
  });
});

describe('CSRF', () => {
  test('error: a POST without the token, with a wrong one, or with another session\'s is 403 and changes nothing', async () => {
    const before = (await admin.client.listAgents({ orgId }, admin.auth)).agents.length;
    for (const csrf of [undefined, '', 'x'.repeat(43), approver.csrf]) {
      const form: Record<string, string> = { name: 'csrf-victim' };
      if (csrf !== undefined) form._csrf = csrf;
      const r = await dashboardFetch(s.url, owner, '/dashboard/agents', { form });
      expect(r.status, String(csrf)).toBe(403);
      expect(await r.text()).toMatch(/did not come from the dashboard/);
    }
    expect((await admin.client.listAgents({ orgId }, admin.auth)).agents.length).toBe(before);
  });

  test('behavior: the X-CSRF-Token header is accepted in place of the field', async () => {
    const r = await dashboardFetch(s.url, owner, '/dashboard/agents', { form: { name: 'header-token' }, headers: { 'x-csrf-token': owner.csrf } });
    expect(r.status).toBe(303);
    expect((await admin.client.listAgents({ orgId }, admin.auth)).agents.some((a) => a.name === 'header-token')).toBe(true);
  });

  test('error: a cross-site POST is refused even with the right token', async () => {
    const r = await dashboardFetch(s.url, owner, '/dashboard/agents', { form: { name: 'xs', _csrf: owner.csrf }, headers: { 'sec-fetch-site': 'cross-site' } });
    expect(r.status).toBe(403);
  });

  test('error: sign-in without the sign-in form\'s cookie and token is refused before the password is checked', async () => {
    const form = await signInForm(s.url);
    const noCookie = await fetch(`${s.url}/dashboard/sign-in`, {
      method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded', connection: 'close' },
      body: new URLSearchParams({ _csrf: form.token, email: 'owner@example.com', password: PASSWORD }),
    });
    expect(noCookie.status).toBe(403);
    expect(noCookie.headers.getSetCookie().some((c) => c.startsWith('pp_session='))).toBe(false);
  });

  test('error: a form over 64 KiB is 413; a body that is not a form is 400', async () => {
    const big = await dashboardFetch(s.url, owner, '/dashboard/agents', { form: { _csrf: owner.csrf, name: 'x'.repeat(70_000) } });
    expect(big.status).toBe(413);
    const json = await fetch(`${s.url}/dashboard/agents`, {
      method: 'POST', redirect: 'manual', headers: { cookie: owner.cookie, 'content-type': 'application/json', 'x-csrf-token': owner.csrf, connection: 'close' },
      body: JSON.stringify({ name: 'x' }),
    });
    expect(json.status).toBe(400);
  });
});

describe('roles', () => {
  test('behavior: an approver decides approvals; the decision records their email', async () => {
    const id = await pending('2', 'role-approver-1');
    const r = await dashboardFetch(s.url, approver, `/dashboard/approvals/${id}/decide`, { form: { _csrf: approver.csrf, decision: 'deny', note: 'no' } });
    expect([r.status, r.headers.get('location')]).toEqual([303, '/dashboard/approvals']);
    const a = (await admin.client.listApprovals({ orgId }, admin.auth)).approvals.find((x) => x.id === id)!;
    expect([approvalStatusCodec.fromProto(a.status), a.decidedBy, a.note]).toEqual(['denied', 'approver@example.com', 'no']);
  });

  test('error: a decision POST without exactly one decision from a button decides nothing', async () => {
    const id = await pending('2.5', 'implicit-submit-1');
    const forms: Array<Record<string, string> | URLSearchParams> = [
      // What an implicit submission (Enter in the note) would send if no button supplied a value.
      { _csrf: approver.csrf, note: 'deny: looks like a duplicate' },
      { _csrf: approver.csrf, decision: '', note: 'deny: looks like a duplicate' },
      { _csrf: approver.csrf, decision: 'Approve', note: '' },
    ];
    for (const form of forms) {
      const r = await fetch(`${s.url}/dashboard/approvals/${id}/decide`, {
        method: 'POST', redirect: 'manual',
        headers: { cookie: approver.cookie, 'content-type': 'application/x-www-form-urlencoded', connection: 'close' },
        body: new URLSearchParams(form),
      });
      expect([r.status, r.headers.get('location')], String(new URLSearchParams(form))).toEqual([303, '/dashboard/approvals']);
      expect(await approvalStatus(id)).toBe('pending');
    }
    const flash = await (await dashboardFetch(s.url, approver, '/dashboard/approvals')).text();
    expect(flash).toMatch(/Nothing was decided/);
  });

  test('behavior: the first submit button of a decision form is inert, so Enter in the note cannot approve', async () => {
    const id = await pending('2.25', 'implicit-submit-2');
    const page = await (await dashboardFetch(s.url, approver, '/dashboard/approvals')).text();
    const card = page.slice(page.indexOf(`data-approval-id="${id}"`));
    const form = card.slice(card.indexOf('<form class="decide"'), card.indexOf('</form>'));
    const buttons = [...form.matchAll(/<button\b[^>]*>/g)].map((m) => m[0]);
    expect(buttons[0]).toMatch(/type="submit"/);
    expect(buttons[0]).toMatch(/\bdisabled\b/);
    expect(buttons[0]).not.toMatch(/name=/);
    expect(buttons.slice(1).map((b) => /value="(\w+)"/.exec(b)?.[1])).toEqual(['approve', 'deny']);
    await dashboardFetch(s.url, approver, `/dashboard/approvals/${id}/decide`, { form: { _csrf: approver.csrf, decision: 'deny', note: '' } });
  });

  test('error: an approver cannot manage agents, keys or the registry (403)', async () => {
    const tries: Array<[string, Record<string, string>]> = [
      ['/dashboard/agents', { name: 'nope' }],
      [`/dashboard/agents/${agentId}/status`, { status: 'paused' }],
      [`/dashboard/agents/${agentId}/policy`, { allowlist: '', spend_cap_usd: '0', approval_threshold_usd: '0' }],
      ['/dashboard/keys', { label: 'nope', mode: 'test' }],
      ['/dashboard/services', { slug: 'nope', name: 'Nope' }],
    ];
    for (const [path, form] of tries) {
      const r = await dashboardFetch(s.url, approver, path, { form: { ...form, _csrf: approver.csrf } });
      expect(r.status, path).toBe(403);
    }
    expect(agentStatusCodec.fromProto((await admin.client.getAgent({ agentId }, admin.auth)).agent!.status)).toBe('active');
  });

  test('error: a viewer cannot decide (403, still pending) and sees no decision form', async () => {
    const id = await pending('3', 'role-viewer-1');
    const r = await dashboardFetch(s.url, viewer, `/dashboard/approvals/${id}/decide`, { form: { _csrf: viewer.csrf, decision: 'approve' } });
    expect(r.status).toBe(403);
    expect(await approvalStatus(id)).toBe('pending');
    const page = await (await dashboardFetch(s.url, viewer, '/dashboard/approvals')).text();
    expect(page).toContain(`data-approval-id="${id}"`);
    expect(page).not.toContain('/decide');
    const json = (await (await dashboardFetch(s.url, viewer, '/dashboard/approvals.json')).json()) as { pending: Array<{ id: string; html: string }> };
    expect(json.pending.find((p) => p.id === id)!.html).not.toContain('/decide');
    expect((await dashboardFetch(s.url, viewer, '/dashboard/services/new')).status).toBe(403);
  });
});

describe('forms that are not understood', () => {
  const statusOf = async (id: string) => agentStatusCodec.fromProto((await admin.client.getAgent({ agentId: id }, admin.auth)).agent!.status);

  test('error: an unknown form field is 400 naming it, and nothing changes', async () => {
    const id = await createAgent(admin, orgId, 'strict-form-1');
    const r = await dashboardFetch(s.url, owner, `/dashboard/agents/${id}/status`, { form: { _csrf: owner.csrf, status: 'paused', stauts: 'paused' } });
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('Unknown form field &quot;stauts&quot;');
    expect(await statusOf(id)).toBe('active');
    const keys = await dashboardFetch(s.url, owner, '/dashboard/keys', { form: { _csrf: owner.csrf, label: 'strict', mode: 'test', scope: 'all' } });
    expect(keys.status).toBe(400);
  });

  test('error: an agent status the select does not offer, or none, changes nothing and says so', async () => {
    const id = await createAgent(admin, orgId, 'strict-form-2');
    for (const form of [{ status: 'PAUSED' }, { status: 'bogus' }, { status: '2' }, {}] as Record<string, string>[]) {
      const r = await dashboardFetch(s.url, owner, `/dashboard/agents/${id}/status`, { form: { _csrf: owner.csrf, ...form } });
      expect([r.status, r.headers.get('location')], JSON.stringify(form)).toEqual([303, `/dashboard/agents/${id}`]);
      const page = await (await dashboardFetch(s.url, owner, `/dashboard/agents/${id}`)).text();
      expect(page, JSON.stringify(form)).toMatch(/status must be one of active, paused, revoked|status or name is required/);
      expect(page, JSON.stringify(form)).not.toMatch(/Agent strict-form-2 (resumed|paused|revoked)/);
    }
    expect(await statusOf(id)).toBe('active');
  });

  test('error: a dashboard user\'s disabled flag other than true or false changes nothing', async () => {
    const userId = (await createUser(admin, orgId, 'strict-form@example.com', 'viewer', PASSWORD)).id;
    await admin.client.updateDashboardUser({ userId, disabled: true }, admin.auth);
    const r = await dashboardFetch(s.url, owner, `/dashboard/users/${userId}/status`, { form: { _csrf: owner.csrf, disabled: 'no' } });
    expect(r.status).toBe(303);
    expect((await admin.client.listDashboardUsers({ orgId }, admin.auth)).users.find((u) => u.id === userId)!.disabled).toBe(true);
  });
});

describe('organization boundary', () => {
  test('error: another organization\'s agents, keys and approvals are not found', async () => {
    expect((await dashboardFetch(s.url, owner, `/dashboard/agents/${other.agentId}`)).status).toBe(404);
    expect((await dashboardFetch(s.url, owner, `/dashboard/agents/${other.agentId}/status`, { form: { _csrf: owner.csrf, status: 'revoked' } })).status).toBe(404);
    expect((await dashboardFetch(s.url, owner, `/dashboard/keys/${other.keyId}/revoke`, { form: { _csrf: owner.csrf } })).status).toBe(404);
    await admin.client.provisionTreasury({ orgId: other.orgId }, admin.auth);
    await setPolicy(admin, other.agentId, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '1' });
    const r = await postSign(s.url, other.apiKey, { agent_id: other.agentId, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: '2' });
    expect(r.status).toBe(202);
    const decide = await dashboardFetch(s.url, owner, `/dashboard/approvals/${r.json.approval_request_id}/decide`, { form: { _csrf: owner.csrf, decision: 'approve' } });
    expect(decide.status).toBe(303);
    const after = await admin.client.listApprovals({ orgId: other.orgId }, admin.auth);
    expect(approvalStatusCodec.fromProto(after.approvals[0]!.status)).toBe('pending');
    expect(agentStatusCodec.fromProto((await admin.client.getAgent({ agentId: other.agentId }, admin.auth)).agent!.status)).toBe('active');
    expect((await rest(s.url, 'POST', '/api/ping', { key: other.apiKey, body: { agent_id: other.agentId } })).status).toBe(200);
    const page = await (await dashboardFetch(s.url, owner, '/dashboard/approvals')).text();
    expect(page).not.toContain(r.json.approval_request_id);
  });
});

describe('escaping', () => {
  test('behavior: names from the database are text, never markup', async () => {
    const evil = '<img src=x onerror=alert(1)>"\'';
    const id = await createAgent(admin, orgId, evil);
    for (const path of ['/dashboard/agents', `/dashboard/agents/${id}`, '/dashboard/spend', '/dashboard/transactions']) {
      const page = await (await dashboardFetch(s.url, owner, path)).text();
      expect(page, path).not.toContain('<img src=x');
      expect(page, path).toContain('&lt;img src=x onerror=alert(1)&gt;&quot;&#39;');
    }
  });
});

describe('transactions', () => {
  test('behavior: pages of 50 with a next link that follows the ledger to its end', async () => {
    const agent = await createAgent(admin, orgId, 'pager');
    // 57 ledger rows: the new agent's policy allows nothing, so each request is a denied row (pings
    // would record one row per interval).
    await Promise.all(Array.from({ length: 57 }, () => postSign(s.url, key, { agent_id: agent, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: '1' })));
    const first = await (await dashboardFetch(s.url, owner, `/dashboard/transactions?agent=${agent}`)).text();
    expect(first.match(/<tr>\n<td class="c-time[^"]*"><time/g)).toHaveLength(50);
    const next = /href="([^"]+)" rel="next"/.exec(first)![1]!.replace(/&amp;/g, '&');
    const second = await (await dashboardFetch(s.url, owner, next)).text();
    expect(second.match(/<tr>\n<td class="c-time[^"]*"><time/g)).toHaveLength(7);
    expect(second).not.toContain('rel="next"');
    expect(second).toContain('First page');
  });

  test('behavior: CSV export: attachment, RFC 4180 quoting, formula cells neutralized, filters applied', async () => {
    const id = await pending('4.5', 'csv-1');
    const note = '=cmd|" /C calc"!A0, "quoted"\nsecond line';
    const d = await dashboardFetch(s.url, owner, `/dashboard/approvals/${id}/decide`, { form: { _csrf: owner.csrf, decision: 'deny', note } });
    expect(d.status).toBe(303);
    const r = await dashboardFetch(s.url, owner, `/dashboard/transactions.csv?agent=${agentId}&status=denied`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(r.headers.get('content-disposition')).toMatch(/^attachment; filename="paypolicy-transactions-\d{8}-\d{4}\.csv"$/);
    const text = await r.text();
    const lines = text.split('\r\n');
    expect(lines[0]).toBe('created_at,transaction_id,agent_id,agent_name,type,status,amount_usd,chain_id,recipient_address,service_slug,approval_request_id,reason,chain_status,tx_hash,block_number,network_fee_wei');
    expect(text).toContain(`,denied,4.5,8453,${RECIPIENT.toLowerCase()},,${id},"Denied by approver: =cmd|"" /C calc""!A0, ""quoted""\nsecond line",,,,\r\n`);
    expect(text).not.toMatch(/,signed,|,recorded,/);
    const bad = await dashboardFetch(s.url, owner, '/dashboard/transactions.csv?from=yesterday');
    expect(bad.status).toBe(400);
  });

  test('behavior: a viewer can export; another organization\'s rows never appear', async () => {
    const text = await (await dashboardFetch(s.url, viewer, `/dashboard/transactions.csv?agent=${other.agentId}`)).text();
    expect(text.trim().split('\r\n')).toHaveLength(1);
  });
});

/** The owner's policy form for an agent: allow RECIPIENT, cap $9, approval above $4, plus `fields`. */
function postPolicyForm(id: string, fields: Record<string, string>) {
  return dashboardFetch(s.url, owner, `/dashboard/agents/${id}/policy`, {
    form: { _csrf: owner.csrf, allowlist: RECIPIENT, spend_cap_usd: '9', approval_threshold_usd: '4', ...fields },
  });
}

describe('policy form: the network-fee ceiling in ETH', () => {
  const ceilingOf = async (id: string) => (await admin.client.getAgent({ agentId: id }, admin.auth)).agent!.policy!.maxNetworkFeeWei;
  const post = postPolicyForm;

  test('behavior: the form shows the ceiling in ETH; what is typed in ETH is stored as exactly that many wei', async () => {
    const id = await createAgent(admin, orgId, 'fee-in-eth');
    const page = await (await dashboardFetch(s.url, owner, `/dashboard/agents/${id}`)).text();
    expect(page).toMatch(/<input type="text" inputmode="decimal" id="max-fee" name="max_network_fee_eth" value="0\.001"/);
    for (const [eth, wei] of [['0.002', '2000000000000000'], ['0.000000000000000001', '1'], ['1.5', '1500000000000000000'], ['1000', '1000000000000000000000'], ['0', '0']]) {
      const r = await post(id, { max_network_fee_eth: eth! });
      expect([r.status, r.headers.get('location')], eth).toEqual([303, `/dashboard/agents/${id}`]);
      expect(await ceilingOf(id), eth).toBe(wei);
    }
    await post(id, { max_network_fee_eth: '0.000000000000000777' });
    const shown = await (await dashboardFetch(s.url, owner, `/dashboard/agents/${id}`)).text();
    expect(shown).toContain('name="max_network_fee_eth" value="0.000000000000000777"');
    // Without the field the ceiling stays as it is.
    expect((await post(id, { spend_cap_usd: '8' })).status).toBe(303);
    expect(await ceilingOf(id)).toBe('777');
  });

  test.each([
    [' 1.5 ', 'Max network fee must be an amount of ETH such as 0.001'],
    ['-0.001', 'Max network fee must be an amount of ETH such as 0.001'],
    ['lots', 'Max network fee must be an amount of ETH such as 0.001'],
    ['1e-3', 'Max network fee must be an amount of ETH such as 0.001'],
    ['', 'Max network fee must be an amount of ETH such as 0.001'],
    ['0.0000000000000000001', 'Max network fee has more than 18 decimals: 0.000000000000000001 ETH (1 wei) is the smallest step'],
    ['1000.000000000000000001', 'Max network fee must be from 0 to 1000 ETH'],
  ])('error: invalid_argument: %j is a 400 with the message on the field, kept as typed, and nothing is written', async (value, message) => {
    const id = await createAgent(admin, orgId, 'fee-refused');
    const r = await post(id, { max_network_fee_eth: value });
    expect(r.status).toBe(400);
    const page = await r.text();
    expect(page).toContain(`<p class="field-error" id="max-fee-error">${message}</p>`);
    expect(page).toContain(`name="max_network_fee_eth" value="${value}" aria-invalid="true" aria-describedby="max-fee-error"`);
    expect(await ceilingOf(id)).toBe('1000000000000000');
  });

  test('error: the ceiling posted in wei under its old name is an unknown field, not 10^18 times the amount', async () => {
    const id = await createAgent(admin, orgId, 'fee-old-name');
    const r = await post(id, { max_network_fee_wei: '2000000000000000' });
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('Unknown form field &quot;max_network_fee_wei&quot;');
    expect(await ceilingOf(id)).toBe('1000000000000000');
  });
});

describe('policy form: the maximum per payment', () => {
  const maxOf = async (id: string) => (await admin.client.getAgent({ agentId: id }, admin.auth)).agent!.policy!.maxPerPaymentUsd;
  const post = postPolicyForm;

  test('behavior: set, shown, kept when the field is absent, removed when empty', async () => {
    const id = await createAgent(admin, orgId, 'per-payment');
    expect(await (await dashboardFetch(s.url, owner, `/dashboard/agents/${id}`)).text()).toContain('name="max_per_payment_usd" value=""');
    expect((await post(id, { max_per_payment_usd: '25.5' })).status).toBe(303);
    expect(await maxOf(id)).toBe('25.5');
    expect(await (await dashboardFetch(s.url, owner, `/dashboard/agents/${id}`)).text()).toContain('name="max_per_payment_usd" value="25.5"');
    expect((await post(id, { spend_cap_usd: '8' })).status).toBe(303);
    expect(await maxOf(id)).toBe('25.5');
    expect((await post(id, { max_per_payment_usd: '' })).status).toBe(303);
    expect(await maxOf(id)).toBe('');
    // A viewer sees it, without a form.
    await post(id, { max_per_payment_usd: '3' });
    expect(await (await dashboardFetch(s.url, viewer, `/dashboard/agents/${id}`)).text()).toMatch(/<dt>Max per payment<\/dt><dd>\$3(\.00)?<\/dd>/);
  });

  test('behavior: a threshold not below the maximum saves with a warning that nothing will wait for approval', async () => {
    const id = await createAgent(admin, orgId, 'per-payment-warn');
    const r = await post(id, { max_per_payment_usd: '4' });
    expect(r.status).toBe(303);
    const page = await (await dashboardFetch(s.url, owner, r.headers.get('location')!)).text();
    expect(page).toContain('is not below the maximum per payment');
  });

  test.each([['-1'], ['1.0000001'], ['lots'], [' 2']])('error: invalid_argument: %j is a 400 naming the field, and nothing is written', async (value) => {
    const id = await createAgent(admin, orgId, 'per-payment-refused');
    const r = await post(id, { max_per_payment_usd: value });
    expect(r.status).toBe(400);
    expect(await r.text()).toMatch(/<p class="field-error" id="max-per-payment-error">Max per payment [^<]+<\/p>/);
    expect(await maxOf(id)).toBe('');
  });
});

describe('agent page: window limits', () => {
  test('behavior: the agent\'s and the organization\'s limits are listed for every role, and saving the form keeps them', async () => {
    const id = await createAgent(admin, orgId, 'windowed');
    await admin.client.setPolicy({
      agentId: id, allowlist: [], spendCapUsd: '10', approvalThresholdUsd: '1',
      limits: { items: [{ window: '1h', maxUsd: '5', maxCount: 30 }, { window: '24h', maxUsd: '3', recipient: 'weather' }] },
    }, admin.auth);
    await admin.client.updateOrganization({ orgId, limits: { items: [{ window: '30d', maxUsd: '200' }] } }, admin.auth);
    try {
      const page = await (await dashboardFetch(s.url, viewer, `/dashboard/agents/${id}`)).text();
      expect(page).toContain('<h2 id="limits-heading">Window limits</h2>');
      const rows = [...page.matchAll(/<tr><td>(This agent|Organization)<\/td><td>([^<]+)<\/td><td>(.*?)<\/td>\s*<td>([^<]+)<\/td><td>([^<]+)<\/td>/g)].map((m) => m.slice(1));
      expect(rows).toEqual([
        ['This agent', '1h', 'every recipient', '$5.00', '30'],
        ['This agent', '24h', '<code>weather</code>', '$3.00', '—'],
        ['Organization', '30d', 'every recipient', '$200.00', '—'],
      ]);
      expect((await postPolicyForm(id, { spend_cap_usd: '8' })).status).toBe(303);
      expect((await admin.client.getAgent({ agentId: id }, admin.auth)).agent!.policy!.limits.map((l) => l.window)).toEqual(['1h', '24h']);
    } finally {
      await admin.client.updateOrganization({ orgId, limits: { items: [] } }, admin.auth);
    }
  });
});

describe('services registry', () => {
  const boundary = 'XdashboardBoundary';
  function multipart(fields: Record<string, string>, file?: { name: string; content: string }): { body: Buffer; type: string } {
    let text = '';
    for (const [k, v] of Object.entries(fields)) text += `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
    if (file) text += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.name}"\r\nContent-Type: application/json\r\n\r\n${file.content}\r\n`;
    return { body: Buffer.from(`${text}--${boundary}--\r\n`), type: `multipart/form-data; boundary=${boundary}` };
  }
  const upload = (session: HttpSession, m: { body: Buffer; type: string }) =>
    fetch(`${s.url}/dashboard/services/import`, { method: 'POST', redirect: 'manual', headers: { cookie: session.cookie, 'content-type': m.type, connection: 'close' }, body: m.body });

  test('behavior: importing an uploaded JSON file adds every record, private to the organization', async () => {
    const records = [
      { slug: 'weather', name: 'Weather API', paymentMethods: [{ protocol: 'x402', baseUrl: 'https://weather.example', realm: '' }], endpoints: [{ method: 'GET', path: '/now', priceAtomic: '1000', currency: 'USDC' }] },
      { slug: 'maps', name: 'Maps', description: 'Tiles', category: 'geo' },
    ];
    const r = await upload(owner, multipart({ _csrf: owner.csrf, json: '' }, { name: 'registry.json', content: JSON.stringify(records) }));
    expect([r.status, r.headers.get('location')]).toEqual([303, '/dashboard/services']);
    const list = await admin.client.listServices({ orgId }, admin.auth);
    expect(list.services.map((x) => x.slug)).toEqual(expect.arrayContaining(['weather', 'maps']));
    expect((await admin.client.listServices({}, admin.auth)).services).toEqual([]);
    expect(await (await dashboardFetch(s.url, owner, '/dashboard/services')).text()).toMatch(/Imported 2 services/);
  });

  test('error: one bad record rejects the whole import with its position; no CSRF token is 403', async () => {
    const records = [{ slug: 'fine-one', name: 'Fine' }, { slug: 'Bad Slug', name: 'Bad' }];
    const r = await upload(owner, multipart({ _csrf: owner.csrf, json: JSON.stringify(records) }));
    expect(r.status).toBe(400);
    expect(await r.text()).toMatch(/record 2 \(Bad Slug\): slug must be 1 to 64 lowercase/);
    expect((await admin.client.listServices({ orgId }, admin.auth)).services.some((x) => x.slug === 'fine-one')).toBe(false);
    const noToken = await upload(owner, multipart({ json: JSON.stringify([{ slug: 'x', name: 'X' }]) }));
    expect(noToken.status).toBe(403);
  });

  test('error: a key given twice in the import or in the endpoints field is 400 naming it, and nothing is saved', async () => {
    const r = await upload(owner, multipart({ _csrf: owner.csrf, json: '[{"slug":"dup-import","name":"First","name":"Second"}]' }));
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('the import has a duplicate key &quot;[0].name&quot;');
    const form = await dashboardFetch(s.url, owner, '/dashboard/services', {
      form: { _csrf: owner.csrf, mode: 'new', slug: 'dup-form', name: 'Dup', endpoints: '[{"method":"GET","path":"/a","path":"/b"}]' },
    });
    expect(form.status).toBe(400);
    expect(await form.text()).toContain('endpoints has a duplicate key &quot;[0].path&quot;');
    expect((await admin.client.listServices({ orgId }, admin.auth)).services.some((x) => x.slug.startsWith('dup-'))).toBe(false);
  });

  test('behavior: add through the form; a new form never overwrites an existing slug; field errors sit by their field', async () => {
    const add = await dashboardFetch(s.url, owner, '/dashboard/services', {
      form: { _csrf: owner.csrf, mode: 'new', slug: 'search', name: 'Search', methods: 'x402 https://search.example/api', endpoints: '' },
    });
    expect(add.status).toBe(303);
    const saved = (await admin.client.listServices({ orgId }, admin.auth)).services.find((x) => x.slug === 'search')!;
    expect(saved.paymentMethods).toEqual([expect.objectContaining({ protocol: 'x402', baseUrl: 'https://search.example/api', realm: '' })]);
    const again = await dashboardFetch(s.url, owner, '/dashboard/services', { form: { _csrf: owner.csrf, mode: 'new', slug: 'search', name: 'Other' } });
    expect(again.status).toBe(400);
    expect(await again.text()).toMatch(/id="svc-slug-error">slug is already registered/);
    const badUrl = await dashboardFetch(s.url, owner, '/dashboard/services', { form: { _csrf: owner.csrf, mode: 'edit', slug: 'search', name: 'Search', docsUrl: 'ftp://x' } });
    expect(await badUrl.text()).toMatch(/id="svc-docs-error">docs_url must be an absolute http\(s\) URL/);
  });
});

describe('AdminService.CreateDashboardUser', () => {
  test('behavior: returns the user without any password material', async () => {
    const r = await admin.client.createDashboardUser({ orgId, email: 'New.Person@Example.com', role: DashboardRole.APPROVER, password: PASSWORD }, admin.auth);
    expect(r.user).toMatchObject({ orgId, email: 'new.person@example.com', role: DashboardRole.APPROVER, disabled: false });
    expect(JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(PASSWORD);
    expect(Object.keys(r.user!)).not.toContain('password');
  });

  test('error: invalid_argument for a short password or no role; already_exists for a taken email; unauthenticated without the token', async () => {
    await expectRpcError(admin.client.createDashboardUser({ orgId, email: 'a@example.com', role: DashboardRole.VIEWER, password: 'short' }, admin.auth), Code.InvalidArgument, /at least 12/);
    await expectRpcError(admin.client.createDashboardUser({ orgId, email: 'a@example.com', role: DashboardRole.UNSPECIFIED, password: PASSWORD }, admin.auth), Code.InvalidArgument, /role/);
    await expectRpcError(admin.client.createDashboardUser({ orgId, email: 'owner@example.com', role: DashboardRole.VIEWER, password: PASSWORD }, admin.auth), Code.AlreadyExists);
    await expectRpcError(admin.client.createDashboardUser({ orgId, email: 'b@example.com', role: DashboardRole.VIEWER, password: PASSWORD }), Code.Unauthenticated);
  });
});

describe('paypolicy user create', () => {
  function run(args: string[], env: Record<string, string>, stdin: string | undefined) {
    const clean: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PAYPOLICY_')) clean[k] = v;
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...clean, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.stdin.end(stdin ?? '');
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('close', (code) => resolve({ code, stdout: out, stderr: err })));
  }
  const base = () => ['--url', s.url, '--admin-token', s.bootstrap.admin_token, '--org', orgId, '--role', 'owner'];

  test('behavior: the first owner from a piped password; the password is never printed; they can sign in', async () => {
    const secret = 'piped secret passphrase';
    const r = await run(['user', 'create', ...base(), '--email', 'cli-owner@example.com', '--password-stdin'], {}, `${secret}\n`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/email\s+cli-owner@example\.com/);
    expect(r.stdout).toMatch(/role\s+owner/);
    expect(r.stdout + r.stderr).not.toContain(secret);
    expect((await postSignIn(s.url, 'cli-owner@example.com', secret)).status).toBe(303);
  });

  test('behavior: PAYPOLICY_DASHBOARD_PASSWORD for scripts', async () => {
    const secret = 'environment passphrase';
    const r = await run(['user', 'create', ...base(), '--email', 'env-owner@example.com', '--json'], { PAYPOLICY_DASHBOARD_PASSWORD: secret }, undefined);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).user).toMatchObject({ email: 'env-owner@example.com', role: 'DASHBOARD_ROLE_OWNER' });
    expect(r.stdout).not.toContain(secret);
    expect((await postSignIn(s.url, 'env-owner@example.com', secret)).status).toBe(303);
  });

  test('error: exit 2 with neither stdin nor the variable; exit 1 with the server\'s reason for a short password', async () => {
    const none = await run(['user', 'create', ...base(), '--email', 'x@example.com'], {}, undefined);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/--password-stdin/);
    const short = await run(['user', 'create', ...base(), '--email', 'x@example.com', '--password-stdin'], {}, 'short\n');
    expect(short.code).toBe(1);
    expect(short.stderr).toMatch(/invalid_argument: password must be at least 12 characters/);
    expect(short.stderr).not.toContain('short\n');
  });
});
