import { getAddress, type Hex } from 'viem';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService } from '../../gen/paypolicy/v1/admin_pb.js';
import { AgentStatus, ApprovalStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { createAgent, type Admin } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { postSign, recoverAuthorizationSigner, setPolicy, type WireAuthorization } from '../helpers/payments.js';
import { bearer } from '../helpers/rpc.js';
import { rest, startTestServer, type TestServer } from '../helpers/server.js';
import { createUser, launchChromium } from './helpers.js';

/**
 * The dashboard in headless Chromium against the real server: sign-in, live approvals, decisions
 * the agent collects, agents and policies, API keys, roles, CSRF, headers and lockout. Layout,
 * accessibility and the README's screenshots are in a11y.e2e.test.ts.
 */

const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';
const OTHER_RECIPIENT = '0x7a16fF8270133F063aAb6C9977183D9e72835428';
const DAY = 24 * 3600_000;
const OWNER = { email: 'olivia@example.com', password: 'owner-passphrase-42' };
const VIEWER = { email: 'victor@example.com', password: 'viewer-passphrase-42' };
const APPROVER = { email: 'alex@example.com', password: 'approver-passphrase-42' };

let offset = 0;
let s: TestServer;
let admin: Admin;
let browser: Browser;
let owner: BrowserContext;
let page: Page;
let orgId: string;
let key: string;
let demoAgent: string;
/** Console errors and uncaught exceptions of every page; a CSP violation shows up here. */
const browserErrors: string[] = [];

async function signIn(p: Page, who: { email: string; password: string }): Promise<void> {
  await p.goto(`${s.url}/dashboard/sign-in`);
  await p.getByLabel('Email').fill(who.email);
  await p.getByLabel('Password').fill(who.password);
  await p.getByRole('button', { name: 'Sign in' }).click();
  await p.waitForURL(/\/dashboard\/(agents|approvals)$/);
}

function pay(agentId: string, amountUsd: string, recipient = RECIPIENT) {
  return { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: recipient, amount_usd: amountUsd };
}

/** Payments in the past, so the spend charts have a week of history. */
async function history(agentId: string, amounts: Array<[daysAgo: number, usd: string]>): Promise<void> {
  for (const [daysAgo, amount] of amounts) {
    offset = -daysAgo * DAY;
    const r = await postSign(s.url, key, pay(agentId, amount));
    expect(r.status, r.text).toBe(200);
  }
  offset = 0;
}

beforeAll(async () => {
  [s, browser] = await Promise.all([startTestServer({ logLevel: 'warn', now: () => Date.now() + offset }), launchChromium()]);
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  orgId = s.bootstrap.org_id;
  key = s.bootstrap.api_key;
  demoAgent = s.bootstrap.agent_id;
  await createUser(admin, orgId, OWNER.email, 'owner', OWNER.password);
  await createUser(admin, orgId, VIEWER.email, 'viewer', VIEWER.password);
  await createUser(admin, orgId, APPROVER.email, 'approver', APPROVER.password);
  await setPolicy(admin, demoAgent, { allowlist: [RECIPIENT, OTHER_RECIPIENT], capUsd: '40', thresholdUsd: '2' });
  const research = await createAgent(admin, orgId, 'research-agent');
  await setPolicy(admin, research, { allowlist: [RECIPIENT], capUsd: '30', thresholdUsd: '15' });
  await history(demoAgent, [[6, '1.5'], [5, '2'], [3, '0.8'], [2, '1.9'], [1, '1.2'], [0.2, '1.75']]);
  await history(research, [[6, '8'], [4, '12.5'], [3, '6'], [1, '9.75'], [0.5, '7.25'], [0.1, '4.5']]);
  await rest(s.url, 'POST', '/api/ping', { key, body: { agent_id: demoAgent }, headers: { connection: 'close' } });
  owner = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  owner.on('page', (p) => {
    // Error statuses are expected (a 400 re-renders a form with its messages); script errors and CSP refusals are not.
    p.on('console', (m) => void (m.type() === 'error' && !m.text().startsWith('Failed to load resource') && browserErrors.push(m.text())));
    p.on('pageerror', (e) => void browserErrors.push(e.message));
  });
  page = await owner.newPage();
  page.on('dialog', (d) => void d.accept());
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await s?.close();
});

describe('dashboard in a browser', () => {
  test('behavior: sign-in lands on the dashboard; pages carry the security headers', async () => {
    const signInResponse = await page.goto(`${s.url}/dashboard/sign-in`);
    const headers = signInResponse!.headers();
    expect(headers['content-security-policy']).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    expect(headers['x-frame-options']).toBe('DENY');
    expect(headers['x-content-type-options']).toBe('nosniff');
    expect(headers['referrer-policy']).toBe('no-referrer');
    expect(headers['cache-control']).toBe('no-store');
    await signIn(page, OWNER);
    expect(page.url()).toBe(`${s.url}/dashboard/agents`);
    const cookie = (await owner.cookies()).find((c) => c.name === 'pp_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/dashboard' });
    expect(await page.getByRole('row', { name: /demo-agent/ }).getByText('connected').isVisible()).toBe(true);
  });

  test('behavior: a payment above the threshold appears without reload; Approve; the repeat collects a treasury signature', async () => {
    await page.goto(`${s.url}/dashboard/approvals`);
    // A marker on the page's window survives only as long as no navigation or reload happens.
    await page.evaluate('window.notReloaded = true');
    const first = await postSign(s.url, key, pay(demoAgent, '5'), 'dash-approve-1');
    expect(first.status, first.text).toBe(202);
    const card = page.locator(`[data-approval-id="${first.json.approval_request_id}"]`);
    await card.waitFor({ state: 'visible', timeout: 10_000 });
    expect(await page.evaluate('window.notReloaded')).toBe(true);
    await expect(card.textContent()).resolves.toMatch(/\$5\.00[\s\S]*demo-agent[\s\S]*exceeds the approval threshold/);
    await expect(card.locator('[data-expires-at]').textContent()).resolves.toMatch(/expires in \d+:\d\d|expires in \d+ h/);

    await card.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(`${s.url}/dashboard/approvals`);
    await expect(page.getByRole('status').textContent()).resolves.toMatch(/Approved \$5\.00/);
    await expect(page.getByRole('row', { name: new RegExp(`approved.*demo-agent.*\\$5\\.00.*${OWNER.email}`) }).count()).resolves.toBe(1);

    const repeat = await postSign(s.url, key, pay(demoAgent, '5'), 'dash-approve-1');
    expect(repeat.status, repeat.text).toBe(200);
    expect(repeat.json.transaction_id).toBe(first.json.transaction_id);
    const signer = await recoverAuthorizationSigner(repeat.json.signature as Hex, repeat.json.authorization as WireAuthorization);
    expect(signer).toBe(getAddress(s.bootstrap.treasury_address));
  });

  test('behavior: Deny with a note; the repeat gets 403 with the denial', async () => {
    const r = await postSign(s.url, key, pay(demoAgent, '3.25', OTHER_RECIPIENT), 'dash-deny-1');
    expect(r.status, r.text).toBe(202);
    const card = page.locator(`[data-approval-id="${r.json.approval_request_id}"]`);
    await card.waitFor({ state: 'visible', timeout: 10_000 });
    await card.getByLabel(/Note/).fill('not in this month\'s budget');
    await card.getByRole('button', { name: 'Deny' }).click();
    await page.waitForURL(`${s.url}/dashboard/approvals`);
    await expect(page.getByRole('row', { name: /denied.*\$3\.25.*not in this month's budget/ }).count()).resolves.toBe(1);
    const repeat = await postSign(s.url, key, pay(demoAgent, '3.25', OTHER_RECIPIENT), 'dash-deny-1');
    expect(repeat.status, repeat.text).toBe(403);
    expect(repeat.json.reason).toMatch(/not in this month's budget/);
  });

  test('behavior: Enter in the note field decides nothing; only the labelled button decides', async () => {
    const r = await postSign(s.url, key, pay(demoAgent, '4.5', OTHER_RECIPIENT), 'dash-enter-1');
    expect(r.status, r.text).toBe(202);
    const id = r.json.approval_request_id as string;
    await page.goto(`${s.url}/dashboard/approvals`);
    const card = page.locator(`[data-approval-id="${id}"]`);
    await card.waitFor({ state: 'visible', timeout: 10_000 });
    // Every form submission the page starts, with the value of the button that started it.
    await page.evaluate(`window.submits = [];
      document.addEventListener('submit', function (e) { window.submits.push(e.submitter ? e.submitter.value : '(none)'); }, true);`);
    const note = card.getByLabel(/Note/);
    await note.fill('deny: looks like a duplicate');
    await note.press('Enter');
    // The key events are handled by the time press() returns: a submission would have fired.
    expect(await page.evaluate("window.submits || 'the page was replaced: the form was submitted'")).toEqual([]);
    const still = await admin.client.listApprovals({ orgId, status: ApprovalStatus.PENDING }, admin.auth);
    expect(still.approvals.map((a) => a.id)).toContain(id);

    await card.getByRole('button', { name: 'Deny' }).click();
    await page.waitForURL(`${s.url}/dashboard/approvals`);
    await expect(page.getByRole('status').textContent()).resolves.toMatch(/Denied \$4\.50/);
    const decided = (await admin.client.listApprovals({ orgId }, admin.auth)).approvals.find((a) => a.id === id)!;
    expect([decided.status, decided.note]).toEqual([ApprovalStatus.DENIED, 'deny: looks like a duplicate']);
  });

  test('behavior: create an agent and set its policy, with validation next to the field', async () => {
    await page.goto(`${s.url}/dashboard/agents`);
    await page.getByLabel('Name').fill('travel-booker');
    await page.getByRole('button', { name: 'Add agent' }).click();
    await page.waitForURL(/\/dashboard\/agents\/agt_[0-9a-f]+$/);
    const agentId = page.url().split('/').at(-1)!;

    await page.getByLabel(/Allowed recipients/).fill(`${RECIPIENT}\n0x12345`);
    await page.getByLabel(/Spend cap/).fill('12.5');
    await page.getByLabel(/Approval above/).fill('abc');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await expect(page.locator('#allowlist-error').textContent()).resolves.toMatch(/"0x12345" is neither a 0x address nor a service slug/);
    await expect(page.locator('#threshold-error').textContent()).resolves.toMatch(/^Approval above must be a non-negative decimal/);
    expect(await page.locator('#spend-cap-error').count()).toBe(0);
    expect(await page.getByLabel(/Allowed recipients/).getAttribute('aria-invalid')).toBe('true');

    await page.getByLabel(/Allowed recipients/).fill(`${RECIPIENT}\nweather`);
    await page.getByLabel(/Approval above/).fill('2.5');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await expect(page.getByRole('status').textContent()).resolves.toMatch(/Policy of travel-booker saved/);
    const saved = await admin.client.getAgent({ agentId }, admin.auth);
    expect(saved.agent!.policy).toMatchObject({ allowlist: [RECIPIENT.toLowerCase(), 'weather'], spendCapUsd: '12.5', approvalThresholdUsd: '2.5' });

    await page.getByRole('button', { name: 'Pause' }).click();
    await expect(page.getByRole('status').textContent()).resolves.toMatch(/travel-booker paused/);
    expect((await admin.client.getAgent({ agentId }, admin.auth)).agent!.status).toBe(AgentStatus.PAUSED);
    await page.getByRole('button', { name: 'Resume' }).click();
    expect((await admin.client.getAgent({ agentId }, admin.auth)).agent!.status).toBe(AgentStatus.ACTIVE);

  });

  test('behavior: create an API key (shown once, copyable), then revoke it: the key gets 401', async () => {
    await owner.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: s.url });
    await page.goto(`${s.url}/dashboard/keys`);
    await page.getByLabel(/Label/).fill('ci-runner');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.waitForURL(`${s.url}/dashboard/keys`);
    const plaintext = await page.locator('#new-secret').inputValue();
    expect(plaintext).toMatch(/^ak_test_[0-9a-f]{48}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(plaintext);

    const ping = () => rest(s.url, 'POST', '/api/ping', { key: plaintext, body: { agent_id: demoAgent }, headers: { connection: 'close' } });
    expect((await ping()).status).toBe(200);
    await page.reload();
    expect(await page.locator('#new-secret').count()).toBe(0);
    expect(await page.content()).not.toContain(plaintext);

    const row = page.getByRole('row', { name: /ci-runner/ });
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.waitForURL(`${s.url}/dashboard/keys`);
    await expect(page.getByRole('row', { name: /ci-runner/ }).getByText('revoked').count()).resolves.toBe(1);
    const after = await ping();
    expect(after.status).toBe(401);
  });

  test('behavior: the spend page draws the week against the cap', async () => {
    const response = await page.goto(`${s.url}/dashboard/spend`);
    expect(response!.status()).toBe(200);
    const block = page.locator(`#agent-${demoAgent}`);
    // 1.75 within the last 24 h plus the approved 5.00 (denied 3.25 released) = 6.75 of 40.
    await expect(block.textContent()).resolves.toMatch(/\$6\.75 of \$40\.00/);
    expect(await block.locator('svg').count()).toBe(2);
    // The cap as a meter named by its numbers.
    const cap = block.getByRole('meter', { name: 'Spend cap, the last 24 hours $6.75 of $40.00 · $33.25 left', exact: true });
    expect([await cap.getAttribute('value'), await cap.getAttribute('max')]).toEqual(['6.75', '40']);
  });

  test('behavior: limits added in the policy form, without script, are drawn on the spend page', async () => {
    const limitsOf = async () => (await admin.client.getAgent({ agentId: demoAgent }, admin.auth)).agent!.policy!.limits.map((l) => [l.window, l.maxUsd, l.maxCount]);
    await page.goto(`${s.url}/dashboard/agents/${demoAgent}`);
    const first = page.getByRole('group', { name: 'Limit 1' });
    await first.getByLabel(/^Window/).fill('1h');
    await first.getByLabel(/^Max USD/).fill('20');
    // Another row: the form comes back as typed with one more, and nothing is saved yet.
    await page.getByRole('button', { name: 'Add a limit row' }).click();
    const second = page.getByRole('group', { name: 'Limit 2' });
    await second.waitFor();
    expect(await first.getByLabel(/^Window/).inputValue()).toBe('1h');
    expect(await limitsOf()).toEqual([]);
    await second.getByLabel(/^Window/).fill('7d');
    await second.getByLabel(/^Max payments/).fill('50');
    // Enter in a field saves the policy, as the Save button does, not the "Add a limit row" before it.
    await second.getByLabel(/^Max payments/).press('Enter');
    await expect(page.getByRole('status').textContent()).resolves.toMatch(/Policy of demo-agent saved/);
    try {
      expect(await limitsOf()).toEqual([['1h', '20', undefined], ['7d', undefined, 50]]);
      await page.goto(`${s.url}/dashboard/spend`);
      const block = page.locator(`#agent-${demoAgent}`);
      const hour = block.getByRole('meter', { name: /^Agent's limit, the last hour \$[\d.]+ of \$20\.00 · \$[\d.]+ left$/ });
      expect(await hour.getAttribute('max')).toBe('20');
      const week = block.getByRole('meter', { name: /^Agent's limit, the last 7 days \d+ of 50 payments · \d+ left$/ });
      expect(await week.getAttribute('max')).toBe('50');
      expect(Number(await week.getAttribute('value'))).toBeGreaterThanOrEqual(6);
    } finally {
      await admin.client.setPolicy({ agentId: demoAgent, allowlist: [RECIPIENT, OTHER_RECIPIENT], spendCapUsd: '40', approvalThresholdUsd: '2', limits: { items: [] } }, admin.auth);
    }
  });

  test('behavior: the ledger shows a payment approved in the dashboard and collected as approved by that person, when, with the note', async () => {
    const first = await postSign(s.url, key, pay(demoAgent, '2.5', OTHER_RECIPIENT), 'dash-approved-by-1');
    expect(first.status, first.text).toBe(202);
    await page.goto(`${s.url}/dashboard/approvals`);
    const card = page.locator(`[data-approval-id="${first.json.approval_request_id}"]`);
    await card.getByLabel(/Note/).fill('ok for the offsite');
    const before = Date.now();
    await card.getByRole('button', { name: 'Approve' }).click();
    await page.waitForURL(`${s.url}/dashboard/approvals`);
    const after = Date.now();
    const repeat = await postSign(s.url, key, pay(demoAgent, '2.5', OTHER_RECIPIENT), 'dash-approved-by-1');
    expect(repeat.status, repeat.text).toBe(200);

    await page.goto(`${s.url}/dashboard/transactions?agent=${demoAgent}`);
    const reasonOf = async (amount: string) => {
      const row = page.getByRole('row').filter({ hasText: amount });
      expect(await row.count(), amount).toBe(1);
      expect(await row.locator('.c-status .badge').textContent(), amount).toBe('signed');
      return row.locator('.c-reason');
    };
    const reason = await reasonOf('$2.50');
    expect((await reason.innerText()).trim()).toMatch(new RegExp(`^Approved by ${OWNER.email} \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC\\nNote: ok for the offsite$`));
    const when = Date.parse((await reason.locator('time').getAttribute('datetime'))!);
    expect(when).toBeGreaterThanOrEqual(before);
    expect(when).toBeLessThanOrEqual(after);
    // The payment approved without a note earlier, and collected the same way.
    expect((await (await reasonOf('$5.00')).innerText()).trim()).toMatch(new RegExp(`^Approved by ${OWNER.email} \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC$`));
  });

  test('behavior: a viewer sees pending requests without buttons, and a forged decision is refused', async () => {
    const r = await postSign(s.url, key, pay(demoAgent, '2.75'), 'dash-viewer-1');
    expect(r.status, r.text).toBe(202);
    const approvalId = r.json.approval_request_id as string;
    await page.goto(`${s.url}/dashboard/approvals`);
    await page.locator(`[data-approval-id="${approvalId}"]`).waitFor();

    const viewer = await browser.newContext();
    try {
      const vp = await viewer.newPage();
      await signIn(vp, VIEWER);
      await vp.goto(`${s.url}/dashboard/approvals`);
      const card = vp.locator(`[data-approval-id="${approvalId}"]`);
      await card.waitFor();
      expect(await card.getByRole('button').count()).toBe(0);
      expect(await vp.getByRole('button', { name: 'Approve' }).count()).toBe(0);
      const csrf = await vp.locator('input[name="_csrf"]').first().inputValue();
      const forged = await viewer.request.post(`${s.url}/dashboard/approvals/${approvalId}/decide`, {
        form: { _csrf: csrf, decision: 'approve', note: '' }, maxRedirects: 0,
      });
      expect(forged.status()).toBe(403);
      const created = await viewer.request.post(`${s.url}/dashboard/agents`, { form: { _csrf: csrf, name: 'sneaky' }, maxRedirects: 0 });
      expect(created.status()).toBe(403);
    } finally {
      await viewer.close();
    }
    const still = await admin.client.listApprovals({ orgId, status: ApprovalStatus.PENDING }, admin.auth);
    expect(still.approvals.map((a) => a.id)).toContain(approvalId);
  });

  test('error: a POST without the CSRF token is refused and changes nothing', async () => {
    const before = (await admin.client.listAgents({ orgId }, admin.auth)).agents.length;
    const missing = await owner.request.post(`${s.url}/dashboard/agents`, { form: { name: 'no-token' }, maxRedirects: 0 });
    expect(missing.status()).toBe(403);
    const wrong = await owner.request.post(`${s.url}/dashboard/agents`, { form: { name: 'no-token', _csrf: 'x'.repeat(43) }, maxRedirects: 0 });
    expect(wrong.status()).toBe(403);
    expect((await admin.client.listAgents({ orgId }, admin.auth)).agents.length).toBe(before);
  });

  test('error: five wrong passwords lock the email, even against the right one', async () => {
    const ctx = await browser.newContext();
    try {
      const p = await ctx.newPage();
      const attempt = async (password: string) => {
        await p.goto(`${s.url}/dashboard/sign-in`);
        await p.getByLabel('Email').fill(APPROVER.email);
        await p.getByLabel('Password').fill(password);
        await p.getByRole('button', { name: 'Sign in' }).click();
        await p.waitForLoadState();
        return (await p.getByRole('alert').textContent())?.trim();
      };
      for (let i = 0; i < 4; i++) expect(await attempt(`wrong-password-${i}`)).toBe('Invalid email or password');
      expect(await attempt('wrong-password-4')).toMatch(/Too many failed sign-ins/);
      expect(await attempt(APPROVER.password)).toMatch(/Too many failed sign-ins/);
      expect(p.url()).toBe(`${s.url}/dashboard/sign-in`);
      expect((await ctx.cookies()).some((c) => c.name === 'pp_session')).toBe(false);
    } finally {
      await ctx.close();
    }
  });

  test('behavior: no page logged a script error or a Content-Security-Policy violation', () => {
    expect(browserErrors).toEqual([]);
  });

  test('behavior: sign-out ends the session on the server', async () => {
    const cookie = (await owner.cookies()).find((c) => c.name === 'pp_session')!;
    await page.goto(`${s.url}/dashboard/agents`);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${s.url}/dashboard/sign-in`);
    const replay = await fetch(`${s.url}/dashboard/agents`, { headers: { cookie: `pp_session=${cookie.value}`, connection: 'close' }, redirect: 'manual' });
    expect(replay.status).toBe(303);
    expect(replay.headers.get('location')).toBe('/dashboard/sign-in');
  });
});
