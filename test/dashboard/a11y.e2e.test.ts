import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { createAgent, type Admin } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { bearer } from '../helpers/rpc.js';
import { rest, startTestServer, type TestServer } from '../helpers/server.js';
import { createUser, launchChromium } from './helpers.js';

/**
 * How the dashboard looks and whether everyone can use it, in headless Chromium against the real
 * server: axe-core (WCAG 2.1 A and AA rules) on every page, 200% zoom, keyboard focus, the
 * transactions table on a laptop and a phone, the spend charts, and a screenshot of each page at
 * laptop (1280×800) and phone (390×844) widths. Screenshots go to test-results/screenshots/, or to
 * docs/screenshots/ (shown in the README) when PAYPOLICY_UPDATE_SCREENSHOTS=1.
 */

const SHOTS = new URL(process.env.PAYPOLICY_UPDATE_SCREENSHOTS === '1' ? '../../docs/screenshots/' : '../../test-results/screenshots/', import.meta.url);
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';
const OTHER_RECIPIENT = '0x7a16fF8270133F063aAb6C9977183D9e72835428';
const STRANGER = '0x5fbDB2315678afecb367f032d93F642f64180aa3';
const DAY = 24 * 3600_000;
const MIN = 60_000;
const OWNER = { email: 'olivia@example.com', password: 'owner-passphrase-42' };
const LAPTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

let offset = 0;
let s: TestServer;
let admin: Admin;
let browser: Browser;
let orgId: string;
let key: string;
let demoAgent: string;
let opsAgent: string;
let firstRequested: string;
let secondRequested: string;
const contexts: BrowserContext[] = [];

function pay(agentId: string, amountUsd: string, recipient = RECIPIENT) {
  return { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: recipient, amount_usd: amountUsd };
}

async function signAt(msAgo: number, agentId: string, amountUsd: string, recipient = RECIPIENT, idempotencyKey?: string) {
  offset = -msAgo;
  const r = await postSign(s.url, key, pay(agentId, amountUsd, recipient), idempotencyKey);
  offset = 0;
  return r;
}

/** A signed-in page in a fresh context; `bypassCSP` only so the test can inject axe-core inline. */
async function signedIn(options: Parameters<Browser['newContext']>[0]): Promise<Page> {
  const ctx = await browser.newContext({ bypassCSP: true, ...options });
  contexts.push(ctx);
  const p = await ctx.newPage();
  await p.goto(`${s.url}/dashboard/sign-in`);
  await p.getByLabel('Email').fill(OWNER.email);
  await p.getByLabel('Password').fill(OWNER.password);
  await p.getByRole('button', { name: 'Sign in' }).click();
  await p.waitForURL(/\/dashboard\/(agents|approvals)$/);
  return p;
}

type Violation = { id: string; impact: string; help: string; targets: string[] };

async function axeViolations(p: Page): Promise<Violation[]> {
  if (!(await p.evaluate('typeof window.axe !== "undefined"'))) await p.addScriptTag({ content: AXE });
  return p.evaluate(`axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
    .then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')) })))`);
}

/** How far the document scrolls sideways, in CSS pixels (0 when it fits the viewport). */
function sidewaysScroll(p: Page): Promise<number> {
  return p.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth');
}

/** Relative luminance contrast of two `rgb(...)` colours (WCAG 2.1). */
function contrast(a: string, b: string): number {
  const lum = (c: string) => {
    const [r, g, bl] = c.match(/[\d.]+/g)!.slice(0, 3).map(Number).map((v) => {
      const x = v / 255;
      return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
    }) as [number, number, number];
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/** The page's pages: path and the name of its screenshot. */
const PAGES = (): Array<[name: string, path: string]> => [
  ['approvals', '/dashboard/approvals'],
  ['agents', '/dashboard/agents'],
  ['agent', `/dashboard/agents/${demoAgent}`],
  ['spend', '/dashboard/spend'],
  ['transactions', '/dashboard/transactions'],
  ['keys', '/dashboard/keys'],
  ['services', '/dashboard/services'],
  ['users', '/dashboard/users'],
];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  [s, browser] = await Promise.all([startTestServer({ logLevel: 'warn', now: () => Date.now() + offset }), launchChromium()]);
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  orgId = s.bootstrap.org_id;
  key = s.bootstrap.api_key;
  demoAgent = s.bootstrap.agent_id;
  await createUser(admin, orgId, OWNER.email, 'owner', OWNER.password);
  await setPolicy(admin, demoAgent, { allowlist: [RECIPIENT, OTHER_RECIPIENT], capUsd: '40', thresholdUsd: '2' });
  const research = await createAgent(admin, orgId, 'research-agent');
  await setPolicy(admin, research, { allowlist: [RECIPIENT], capUsd: '30', thresholdUsd: '15' });
  opsAgent = await createAgent(admin, orgId, 'operations-scheduler');
  await setPolicy(admin, opsAgent, { allowlist: [OTHER_RECIPIENT], capUsd: '10', thresholdUsd: '20' });
  for (const [daysAgo, usd] of [[6, '1.5'], [5, '2'], [3, '0.8'], [2, '1.9'], [1, '1.2'], [0.2, '1.75']] as const) {
    expect((await signAt(daysAgo * DAY, demoAgent, usd)).status).toBe(200);
  }
  for (const [daysAgo, usd] of [[6, '8'], [4, '12.5'], [3, '6'], [1, '9.75'], [0.5, '7.25']] as const) {
    expect((await signAt(daysAgo * DAY, research, usd)).status).toBe(200);
  }
  // $9.80 of a $10 cap today: its bar's label sits right at the cap line.
  expect((await signAt(2 * DAY, opsAgent, '4', OTHER_RECIPIENT)).status).toBe(200);
  expect((await signAt(3 * 3600_000, opsAgent, '9.8', OTHER_RECIPIENT)).status).toBe(200);
  // A refusal with a long reason.
  expect((await signAt(2 * 3600_000, research, '3', STRANGER)).status).toBe(403);
  // Two requests for approval: the first requested is decided last.
  const first = await signAt(30 * MIN, demoAgent, '5', RECIPIENT, 'a11y-first');
  const second = await signAt(20 * MIN, demoAgent, '6', OTHER_RECIPIENT, 'a11y-second');
  expect([first.status, second.status]).toEqual([202, 202]);
  [firstRequested, secondRequested] = [first.json.approval_request_id as string, second.json.approval_request_id as string];
  offset = -10 * MIN;
  await admin.client.decideApproval({ id: secondRequested, decision: Decision.DENY, note: 'not this month', decidedBy: OWNER.email }, admin.auth);
  offset = -5 * MIN;
  await admin.client.decideApproval({ id: firstRequested, decision: Decision.APPROVE, note: 'fine', decidedBy: OWNER.email }, admin.auth);
  offset = 0;
  expect((await postSign(s.url, key, pay(demoAgent, '4.5'), 'a11y-pending')).status).toBe(202);
  await rest(s.url, 'POST', '/api/ping', { key, body: { agent_id: demoAgent }, headers: { connection: 'close' } });
  // Window limits of the agent and of the organization, set after the payments above: the pages
  // draw them (Spend) and edit them (the agent's policy form, the organization's on Spend).
  await admin.client.setPolicy({
    agentId: demoAgent, allowlist: [RECIPIENT, OTHER_RECIPIENT], spendCapUsd: '40', approvalThresholdUsd: '2',
    limits: { items: [{ window: '1h', maxUsd: '15', maxCount: 10 }, { window: '7d', maxUsd: '60', recipient: 'weather' }] },
  }, admin.auth);
  await admin.client.updateOrganization({ orgId, limits: { items: [{ window: '30d', maxUsd: '500', maxNetworkFeeWei: '10000000000000000' }] } }, admin.auth);
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await s?.close();
});

// Each test drives a browser through every page; on a machine busy with other files that can take
// longer than the default 30 s without anything being wrong.
describe('dashboard looks and accessibility', { timeout: 120_000 }, () => {
  test('a11y: axe-core finds no WCAG 2.1 A or AA violation on any page at desktop width', async () => {
    const anonymous = await browser.newContext({ bypassCSP: true, viewport: LAPTOP });
    contexts.push(anonymous);
    const signInPage = await anonymous.newPage();
    await signInPage.goto(`${s.url}/dashboard/sign-in`);
    const found: Record<string, Violation[]> = { 'sign-in': await axeViolations(signInPage) };

    const p = await signedIn({ viewport: LAPTOP });
    const paths = [...PAGES().map(([, path]) => path), '/dashboard/services/new', '/dashboard/no-such-page'];
    for (const path of paths) {
      await p.goto(`${s.url}${path}`);
      found[path] = await axeViolations(p);
    }
    // A form re-rendered with its errors.
    await p.goto(`${s.url}/dashboard/agents/${demoAgent}`);
    await p.getByLabel(/Approval above/).fill('abc');
    await p.getByRole('button', { name: 'Save policy' }).click();
    await p.waitForLoadState();
    found['policy form with errors'] = await axeViolations(p);
    await p.goto(`${s.url}/dashboard/agents/${demoAgent}`);
    await p.getByRole('group', { name: 'Limit 3' }).getByLabel(/^Window/).fill('weekly');
    await p.getByRole('button', { name: 'Save policy' }).click();
    await p.locator('#limit-3-window-error').waitFor();
    found['limit rows with errors'] = await axeViolations(p);
    // The policy previewed on the agent's past requests, one limit tighter.
    await p.goto(`${s.url}/dashboard/agents/${demoAgent}`);
    await p.getByRole('group', { name: 'Limit 1' }).getByLabel(/^Max USD/).fill('0.01');
    await p.getByRole('button', { name: /^Preview/ }).click();
    await p.locator('#preview-heading').waitFor();
    found['policy preview'] = await axeViolations(p);
    expect(Object.fromEntries(Object.entries(found).filter(([, v]) => v.length > 0))).toEqual({});
  });

  test('a11y: at 200% zoom no page scrolls sideways and the header takes less than a third of the screen', async () => {
    // A 1280×800 window at 200% zoom: 640×400 CSS pixels.
    const p = await signedIn({ viewport: { width: 640, height: 400 }, deviceScaleFactor: 2 });
    for (const [name, path] of PAGES()) {
      await p.goto(`${s.url}${path}`);
      expect(await sidewaysScroll(p), name).toBe(0);
      const header = (await p.locator('header').boundingBox())!;
      expect(header.height, name).toBeLessThan(400 / 3);
    }
  });

  test('a11y: a table that scrolls is a named region that takes keyboard focus', async () => {
    const p = await signedIn({ viewport: { width: 640, height: 400 }, deviceScaleFactor: 2 });
    for (const [path, name] of [['/dashboard/agents', 'Agents'], ['/dashboard/keys', 'API keys'], ['/dashboard/transactions', 'Transactions'], ['/dashboard/approvals', 'Recently decided'], ['/dashboard/users', 'Users']] as const) {
      await p.goto(`${s.url}${path}`);
      const region = p.getByRole('region', { name: new RegExp(name) });
      expect(await region.count(), path).toBe(1);
      await region.focus();
      expect(await p.evaluate("document.activeElement.getAttribute('role') + ': ' + document.activeElement.getAttribute('aria-label')"), path).toBe(`region: ${name}`);
    }
    await p.goto(`${s.url}/dashboard/agents`);
    // It does scroll at this width, so keyboard users need that focus to reach its last columns.
    expect(await p.evaluate("(() => { const el = document.querySelector('[role=region][aria-label=Agents]'); return el.scrollWidth > el.clientWidth; })()")).toBe(true);
  });

  test('a11y: after a failed form submit focus is on an error summary (role=alert) that names the fields by their labels', async () => {
    const p = await signedIn({ viewport: LAPTOP });
    await p.goto(`${s.url}/dashboard/agents/${demoAgent}`);
    await p.getByLabel(/Allowed recipients/).fill(`${RECIPIENT}\n0x12345`);
    await p.getByLabel(/Approval above/).fill('abc');
    await p.getByLabel(/Max network fee/).fill('-1');
    await p.getByRole('button', { name: 'Save policy' }).click();
    await p.locator('#threshold-error').waitFor();
    const focused = await p.evaluate(`(() => { const el = document.activeElement; return { role: el.getAttribute('role'), text: el.textContent, links: Array.from(el.querySelectorAll('a')).map((a) => a.getAttribute('href')) }; })()`) as { role: string; text: string; links: string[] };
    expect(focused.role).toBe('alert');
    expect(focused.links).toEqual(['#allowlist', '#threshold', '#max-fee']);
    expect(focused.text).toMatch(/Approval above must be a non-negative decimal/);
    // The messages use the form's labels, not the API's field names.
    const messages = await p.locator('.field-error').allTextContents();
    expect(messages).toHaveLength(3);
    expect(messages.join('\n')).not.toMatch(/allowlist|approval_threshold_usd|spend_cap_usd|max_network_fee_wei|max_network_fee_eth/);
    expect(messages[0]).toMatch(/^Allowed recipients: "0x12345" is neither a 0x address nor a service slug/);
    expect(messages[2]).toBe('Max network fee must be an amount of ETH such as 0.001');

    // The filters of the ledger and the sign-in form start at their error too.
    const focusedAlert = "(() => { const el = document.activeElement; return el.getAttribute('role') + ': ' + el.textContent.trim(); })()";
    await p.goto(`${s.url}/dashboard/transactions?from=2030-02-01&to=2030-01-01`);
    expect(await p.evaluate(focusedAlert)).toBe('alert: From must be on or before To');
    const anonymous = await browser.newContext({ viewport: LAPTOP });
    contexts.push(anonymous);
    const signInPage = await anonymous.newPage();
    await signInPage.goto(`${s.url}/dashboard/sign-in`);
    await signInPage.getByLabel('Email').fill('nobody@example.com');
    await signInPage.getByLabel('Password').fill('not-the-password-1');
    await signInPage.getByRole('button', { name: 'Sign in' }).click();
    await signInPage.getByRole('alert').waitFor();
    expect(await signInPage.evaluate(focusedAlert)).toBe('alert: Invalid email or password');
  });

  test('a11y: the focus ring has at least 3:1 contrast against white and against the top bar', async () => {
    const p = await signedIn({ viewport: LAPTOP });
    await p.goto(`${s.url}/dashboard/agents`);
    await p.locator('#agent-name').focus();
    await p.keyboard.press('Tab');
    const button = await p.evaluate(`(() => { const el = document.activeElement; const cs = getComputedStyle(el); return { text: el.textContent, color: cs.outlineColor, style: cs.outlineStyle, width: parseFloat(cs.outlineWidth) }; })()`) as { text: string; color: string; style: string; width: number };
    expect(button.text).toBe('Add agent');
    expect(button.style).not.toBe('none');
    expect(button.width).toBeGreaterThanOrEqual(2);
    expect(contrast(button.color, 'rgb(255, 255, 255)')).toBeGreaterThanOrEqual(3);
    await p.getByRole('link', { name: 'Spend' }).focus();
    const nav = await p.evaluate(`(() => { const el = document.activeElement; return { color: getComputedStyle(el).outlineColor, bar: getComputedStyle(el.closest('header')).backgroundColor }; })()`) as { color: string; bar: string };
    expect(contrast(nav.color, nav.bar)).toBeGreaterThanOrEqual(3);
  });

  test('behavior: transactions on a laptop: one line per time, name and address, whole reasons, status badges', async () => {
    const p = await signedIn({ viewport: LAPTOP });
    await p.goto(`${s.url}/dashboard/transactions`);
    type Cell = { column: string; text: string; lines: number; cut: boolean; badge: string | null };
    const cells = await p.evaluate(`(() => {
      const table = document.querySelector('main table');
      const heads = Array.from(table.querySelectorAll('thead th')).map((th) => th.textContent.trim());
      // Lines of text in a cell: text boxes that start below the bottom of the previous line.
      const lines = (el) => {
        const rects = [];
        const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        for (let n = walk.nextNode(); n; n = walk.nextNode()) {
          if (n.textContent.trim() === '') continue;
          const r = document.createRange();
          r.selectNodeContents(n);
          rects.push(...Array.from(r.getClientRects()).filter((x) => x.width > 0));
        }
        rects.sort((a, b) => a.top - b.top);
        let count = 0, bottom = -Infinity;
        for (const r of rects) if (r.top >= bottom - 2) { count++; bottom = r.bottom; } else bottom = Math.max(bottom, r.bottom);
        return count;
      };
      return Array.from(table.querySelectorAll('tbody tr')).flatMap((tr) => Array.from(tr.cells).map((td, i) => ({
        column: heads[i], text: td.textContent.trim(), lines: lines(td), cut: td.scrollWidth > td.clientWidth,
        badge: td.querySelector('.badge') ? td.querySelector('.badge').textContent : null,
      })));
    })()`) as Cell[];
    const column = (name: string) => cells.filter((c) => c.column === name);
    expect(column('Time').length).toBeGreaterThanOrEqual(15);
    for (const name of ['Time', 'Agent', 'Recipient', 'Status', 'Amount', 'Type']) {
      expect(column(name).filter((c) => c.lines > 1).map((c) => c.text), name).toEqual([]);
    }
    const reasons = column('Reason');
    expect(reasons.some((c) => /is not on the agent's allowlist/.test(c.text))).toBe(true);
    expect(reasons.filter((c) => c.cut).map((c) => c.text)).toEqual([]);
    for (const c of column('Status')) expect(c.badge, c.text).toBe(c.text);
    // The ping's `recorded` row is hidden until "Show pings" is ticked (ledger.e2e.test.ts).
    expect(new Set(column('Status').map((c) => c.text))).toEqual(new Set(['signed', 'denied', 'pending_approval'].map((x) => x.replace('_', ' '))));
  });

  test('behavior: transactions on a phone show every row\'s status and amount without scrolling sideways', async () => {
    const p = await signedIn({ viewport: PHONE, isMobile: true, hasTouch: true });
    await p.goto(`${s.url}/dashboard/transactions`);
    expect(await sidewaysScroll(p)).toBe(0);
    const rows = p.locator('main table tbody tr');
    expect(await rows.count()).toBeGreaterThanOrEqual(15);
    const outside = await p.evaluate(`(() => {
      const heads = Array.from(document.querySelectorAll('main table thead th')).map((th) => th.textContent.trim());
      const out = [];
      for (const tr of document.querySelectorAll('main table tbody tr')) {
        for (const name of ['Status', 'Amount', 'Agent', 'Time']) {
          const r = tr.cells[heads.indexOf(name)].getBoundingClientRect();
          if (r.width === 0 || r.left < 0 || r.right > document.documentElement.clientWidth) out.push(name + ': ' + tr.cells[heads.indexOf(name)].textContent.trim());
        }
      }
      return out;
    })()`);
    expect(outside).toEqual([]);
  });

  test('behavior: spend: no label is struck through by a cap line; the organization chart fills its panel', async () => {
    const p = await signedIn({ viewport: LAPTOP });
    await p.goto(`${s.url}/dashboard/spend`);
    const struck = await p.evaluate(`(() => {
      const out = [];
      for (const svg of document.querySelectorAll('main svg')) {
        const cap = svg.querySelector('.cap');
        if (!cap) continue;
        const l = cap.getBoundingClientRect();
        for (const t of svg.querySelectorAll('text')) {
          const r = t.getBoundingClientRect();
          if (r.top < l.bottom && r.bottom > l.top && r.left < l.right && r.right > l.left) out.push(t.textContent);
        }
      }
      return out;
    })()`);
    expect(struck).toEqual([]);
    // The $9.80 day of a $10 cap is drawn and labelled.
    await expect(p.locator(`#agent-${opsAgent} svg text`).allTextContents()).resolves.toContain('$9.80');
    const widths = await p.evaluate(`(() => {
      const panel = document.querySelector('#org-daily').closest('section');
      const svg = Array.from(panel.querySelectorAll('svg')).find((x) => x.getBoundingClientRect().width > 0);
      const cs = getComputedStyle(panel);
      return { chart: svg.getBoundingClientRect().width, panel: panel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) };
    })()`) as { chart: number; panel: number };
    expect(widths.chart).toBeGreaterThanOrEqual(widths.panel * 0.95);
  });

  test('behavior: an error page keeps the pending-approvals badge', async () => {
    const p = await signedIn({ viewport: LAPTOP });
    const r = await p.goto(`${s.url}/dashboard/no-such-page`);
    expect(r!.status()).toBe(404);
    const badge = p.locator('[data-pending-count]');
    expect(await badge.isVisible()).toBe(true);
    expect(await badge.textContent()).toBe('1');
  });

  test('behavior: "Recently decided" lists the latest decision first, whatever the request order', async () => {
    const p = await signedIn({ viewport: LAPTOP });
    await p.goto(`${s.url}/dashboard/approvals`);
    const rows = await p.getByRole('region', { name: /Recently decided/ }).locator('tbody tr').allTextContents();
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(/approved[\s\S]*\$5\.00[\s\S]*fine/);
    expect(rows[1]).toMatch(/denied[\s\S]*\$6\.00[\s\S]*not this month/);
  });

  test('behavior: every page fits a phone and a laptop; screenshots of each', async () => {
    for (const [device, options] of [['laptop', { viewport: LAPTOP }], ['phone', { viewport: PHONE, isMobile: true, hasTouch: true }]] as const) {
      const anonymous = await browser.newContext(options);
      contexts.push(anonymous);
      const signInPage = await anonymous.newPage();
      await signInPage.goto(`${s.url}/dashboard/sign-in`);
      expect(await sidewaysScroll(signInPage), `sign-in on a ${device}`).toBe(0);
      await signInPage.screenshot({ path: new URL(`sign-in-${device}.png`, SHOTS).pathname });
      const p = await signedIn(options);
      for (const [name, path] of PAGES()) {
        await p.goto(`${s.url}${path}`);
        expect(await sidewaysScroll(p), `${name} on a ${device}`).toBe(0);
        await p.screenshot({ path: new URL(`${name}-${device}.png`, SHOTS).pathname, fullPage: true, animations: 'disabled' });
      }
    }
  });
});
