import { getAddress } from 'viem';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { createAgent, createTenant, type Admin, type Tenant } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { bearer } from '../helpers/rpc.js';
import { rest, startTestServer, type TestServer } from '../helpers/server.js';
import { newUuid } from '../../src/store/ids.js';
import { createUser, dashboardFetch, httpSignIn, launchChromium, type HttpSession } from './helpers.js';

/**
 * The transactions page and the decisions table in headless Chromium against the real server,
 * with the longest things a ledger holds: an agent name of several words and one of a single long
 * word, a nine-digit amount, reasons quoting a whole address, long notes with a link. At laptop
 * widths the ledger fits its box and every reason is whole and wraps between words; on a phone
 * every decision's recipient is on screen. Pings are hidden until asked for, on the page and in
 * the CSV alike, and hiding them neither loses nor repeats a row from one page to the next.
 */

const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';
const OTHER_RECIPIENT = '0x7a16fF8270133F063aAb6C9977183D9e72835428';
const STRANGER = '0x5fbDB2315678afecb367f032d93F642f64180aa3';
const MIN = 60_000;
const DAY = 24 * 60 * MIN;
const PASSWORD = 'ledger-passphrase-42';
const OWNER = 'olivia@example.com';
/** Pings record a row at most once per agent per 10 minutes (app/organizations/ping.ts); these are further apart. */
const PING_GAP = 11 * MIN;
const LAPTOPS = [{ width: 1280, height: 800 }, { width: 1440, height: 900 }, { width: 1920, height: 1080 }];
const PHONE = { width: 390, height: 844 };

let offset = 0;
let s: TestServer;
let admin: Admin;
let browser: Browser;
let key: string;
let demoAgent: string;
const contexts: BrowserContext[] = [];
/** Ping rows recorded in the main organization. */
const PINGS = 3;
/** Rows other than pings in the main organization. */
let paymentRows = 0;

function pay(agentId: string, amountUsd: string, recipient = RECIPIENT) {
  return { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: recipient, amount_usd: amountUsd };
}

async function signAt(msAgo: number, agentId: string, amountUsd: string, recipient = RECIPIENT, idempotencyKey?: string) {
  offset = -msAgo;
  const r = await postSign(s.url, key, pay(agentId, amountUsd, recipient), idempotencyKey);
  offset = 0;
  if (idempotencyKey === undefined || r.status === 202) paymentRows++;
  return r;
}

async function pingAt(msAgo: number, apiKey: string, agentId: string) {
  offset = -msAgo;
  const r = await rest(s.url, 'POST', '/api/ping', { key: apiKey, body: { agent_id: agentId }, headers: { connection: 'close' } });
  offset = 0;
  expect(r.status, r.text).toBe(200);
}

async function signedIn(options: Parameters<Browser['newContext']>[0]): Promise<Page> {
  const ctx = await browser.newContext(options);
  contexts.push(ctx);
  const p = await ctx.newPage();
  await p.goto(`${s.url}/dashboard/sign-in`);
  await p.getByLabel('Email').fill(OWNER);
  await p.getByLabel('Password').fill(PASSWORD);
  await p.getByRole('button', { name: 'Sign in' }).click();
  await p.waitForURL(/\/dashboard\/(agents|approvals)$/);
  return p;
}

beforeAll(async () => {
  [s, browser] = await Promise.all([startTestServer({ logLevel: 'warn', now: () => Date.now() + offset }), launchChromium()]);
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  const orgId = s.bootstrap.org_id;
  key = s.bootstrap.api_key;
  demoAgent = s.bootstrap.agent_id;
  await createUser(admin, orgId, OWNER, 'owner', PASSWORD);
  await setPolicy(admin, demoAgent, { allowlist: [RECIPIENT, OTHER_RECIPIENT], capUsd: '40', thresholdUsd: '2' });
  const longName = await createAgent(admin, orgId, 'quarterly-infrastructure-cost-reconciliation-bot');
  await setPolicy(admin, longName, { allowlist: [RECIPIENT], capUsd: '1000000000', thresholdUsd: '1000000000' });
  const oneWord = await createAgent(admin, orgId, 'ReconciliationBotForQuarterlyInfrastructureCosts');

  expect((await signAt(60 * MIN, demoAgent, '1.5')).status).toBe(200);
  expect((await signAt(55 * MIN, longName, '999999999')).status).toBe(200);
  // Refusals whose reasons quote a whole address.
  expect((await signAt(50 * MIN, oneWord, '1')).status).toBe(403);
  expect((await signAt(45 * MIN, demoAgent, '3', STRANGER)).status).toBe(403);
  // Approved with a long note and collected; denied with a note that holds a link.
  const approved = await signAt(40 * MIN, demoAgent, '5', RECIPIENT, 'ledger-approved');
  const denied = await signAt(35 * MIN, demoAgent, '6', OTHER_RECIPIENT, 'ledger-denied');
  expect([approved.status, denied.status]).toEqual([202, 202]);
  offset = -30 * MIN;
  await admin.client.decideApproval({
    id: approved.json.approval_request_id, decision: Decision.APPROVE, decidedBy: OWNER,
    note: 'fine: this is the monthly renewal of the weather data subscription that finance already budgeted for the quarter',
  }, admin.auth);
  await admin.client.decideApproval({
    id: denied.json.approval_request_id, decision: Decision.DENY, decidedBy: OWNER,
    note: 'not this month; see https://wiki.example.com/finance/budgets/2030/q3/infrastructure-and-tooling-allocation',
  }, admin.auth);
  offset = 0;
  expect((await signAt(25 * MIN, demoAgent, '5', RECIPIENT, 'ledger-approved')).status).toBe(200);
  expect((await signAt(20 * MIN, demoAgent, '4.5', RECIPIENT, 'ledger-pending')).status).toBe(202);
  for (let i = 0; i < PINGS; i++) await pingAt(i * PING_GAP, key, demoAgent);
}, 90_000);

afterAll(async () => {
  for (const c of contexts) await c.close();
  await browser?.close();
  await s?.close();
});

type Fit = {
  table: number; box: number; boxScroll: number;
  overflowing: string[];
  reasons: Array<{ text: string; fits: boolean; inBox: boolean; split: string[] }>;
};

/**
 * How the ledger sits in its box: widths, cells whose content overflows them, and for each
 * reason whether it fits its cell, lies inside the box, and which of its words (up to 24
 * characters: longer tokens are addresses, links and ids, which may break anywhere) wrap inside.
 */
function measureLedger(p: Page): Promise<Fit> {
  return p.evaluate(`(() => {
    const box = document.querySelector('.ledger-wrap');
    const table = box.querySelector('table');
    const boxRect = box.getBoundingClientRect();
    const overflowing = Array.from(table.querySelectorAll('td')).filter((td) => td.scrollWidth > td.clientWidth).map((td) => td.textContent.trim());
    const reasons = Array.from(table.querySelectorAll('td.c-reason')).map((td) => {
      const split = [];
      const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        for (const m of n.textContent.matchAll(/\\S+/g)) {
          if (m[0].length > 24) continue;
          const r = document.createRange();
          r.setStart(n, m.index);
          r.setEnd(n, m.index + m[0].length);
          const tops = new Set(Array.from(r.getClientRects()).filter((x) => x.width > 0).map((x) => Math.round(x.top)));
          if (tops.size > 1) split.push(m[0]);
        }
      }
      const rect = td.getBoundingClientRect();
      return { text: td.textContent.trim(), fits: td.scrollWidth <= td.clientWidth, inBox: rect.left >= boxRect.left && rect.right <= boxRect.right, split };
    });
    return { table: table.scrollWidth, box: box.clientWidth, boxScroll: box.scrollWidth, overflowing, reasons };
  })()`);
}

describe('transactions at laptop widths', () => {
  test('behavior: at 1280, 1440 and 1920 px the ledger fits its box, no cell overflows, and every reason is whole and wraps between words', async () => {
    for (const viewport of LAPTOPS) {
      const p = await signedIn({ viewport });
      for (const path of ['/dashboard/transactions', '/dashboard/transactions?pings=1']) {
        await p.goto(`${s.url}${path}`);
        const at = `${viewport.width} px ${path}`;
        const fit = await measureLedger(p);
        expect(fit.table, at).toBeLessThanOrEqual(fit.box);
        expect(fit.boxScroll, at).toBeLessThanOrEqual(fit.box);
        expect(fit.overflowing, at).toEqual([]);
        expect(fit.reasons.length, at).toBeGreaterThanOrEqual(paymentRows);
        expect(fit.reasons.filter((r) => !r.fits || !r.inBox).map((r) => r.text), at).toEqual([]);
        expect(fit.reasons.flatMap((r) => r.split), at).toEqual([]);
        expect(fit.reasons.some((r) => r.text.includes(STRANGER.toLowerCase())), at).toBe(true);
      }
    }
  });
});

describe('recent decisions on a phone', () => {
  test('behavior: at 390 px each decision is a card whose recipient address is whole and inside the screen', async () => {
    const p = await signedIn({ viewport: PHONE, isMobile: true, hasTouch: true });
    await p.goto(`${s.url}/dashboard/approvals`);
    const cards = await p.evaluate(`(() => {
      const box = document.querySelector('[role=region][aria-label="Recently decided"]');
      const width = document.documentElement.clientWidth;
      return {
        sideways: document.documentElement.scrollWidth - width, boxSideways: box.scrollWidth - box.clientWidth,
        recipients: Array.from(box.querySelectorAll('tbody tr')).map((tr) => {
          const shown = Array.from(tr.querySelectorAll('.d-recipient .mono')).filter((el) => el.getClientRects().length > 0);
          const rects = shown.flatMap((el) => Array.from(el.getClientRects()));
          return { text: shown.map((el) => el.textContent).join(' '), inside: rects.length > 0 && rects.every((r) => r.left >= 0 && r.right <= width) };
        }),
      };
    })()`) as { sideways: number; boxSideways: number; recipients: Array<{ text: string; inside: boolean }> };
    expect([cards.sideways, cards.boxSideways]).toEqual([0, 0]);
    expect(cards.recipients).toEqual(expect.arrayContaining([
      { text: getAddress(RECIPIENT.toLowerCase()), inside: true },
      { text: getAddress(OTHER_RECIPIENT.toLowerCase()), inside: true },
    ]));
    expect(cards.recipients.every((r) => r.inside)).toBe(true);
  });

  test('behavior: on a laptop the same table shows each address shortened, with the whole one in its title', async () => {
    const p = await signedIn({ viewport: LAPTOPS[0] });
    await p.goto(`${s.url}/dashboard/approvals`);
    const shown = p.getByRole('region', { name: 'Recently decided' }).locator('.d-recipient .mono:visible');
    const pairs = await shown.evaluateAll((els) => els.map((el) => [el.textContent, el.getAttribute('title')]));
    expect(pairs.sort()).toEqual([['0x2096…287C', getAddress(RECIPIENT.toLowerCase())], ['0x7a16…5428', getAddress(OTHER_RECIPIENT.toLowerCase())]]);
  });
});

describe('pings', () => {
  const typeColumn = (p: Page) => p.locator('main table tbody td.c-type').allTextContents();
  const csvTypes = (text: string) => text.trim().split('\r\n').slice(1).map((line) => line.split(',')[4]);

  test('behavior: hidden by default, listed when "Show pings" is ticked; the CSV export follows the page', async () => {
    const p = await signedIn({ viewport: LAPTOPS[0] });
    await p.goto(`${s.url}/dashboard/transactions`);
    expect(await typeColumn(p)).not.toContain('ping');
    expect(await typeColumn(p)).toHaveLength(paymentRows);
    await expect(p.locator('[data-hidden-pings]').textContent()).resolves.toBe(`${PINGS} pings hidden. Tick Show pings to list them.`);
    const toggle = p.getByLabel(/Show pings/);
    expect(await toggle.isChecked()).toBe(false);
    const hiddenCsv = (await p.getByRole('link', { name: 'Download CSV' }).getAttribute('href'))!;

    await toggle.check();
    await p.getByRole('button', { name: 'Apply' }).click();
    await p.waitForURL(/[?&]pings=1/);
    expect(await p.getByLabel(/Show pings/).isChecked()).toBe(true);
    const types = await typeColumn(p);
    expect(types.filter((t) => t === 'ping')).toHaveLength(PINGS);
    expect(types).toHaveLength(paymentRows + PINGS);
    expect(await p.locator('[data-hidden-pings]').count()).toBe(0);
    const shownCsv = (await p.getByRole('link', { name: 'Download CSV' }).getAttribute('href'))!;
    expect([hiddenCsv, shownCsv]).toEqual(['/dashboard/transactions.csv', '/dashboard/transactions.csv?pings=1']);

    const hidden = csvTypes(await (await p.request.get(`${s.url}${hiddenCsv}`)).text());
    const shown = csvTypes(await (await p.request.get(`${s.url}${shownCsv}`)).text());
    expect([hidden.length, hidden.filter((t) => t === 'ping').length]).toEqual([paymentRows, 0]);
    expect([shown.length, shown.filter((t) => t === 'ping').length]).toEqual([paymentRows + PINGS, PINGS]);
  });
});

describe('paging with pings hidden', () => {
  /** A separate organization, so its ledger holds only what a test puts there. */
  async function quietOrg(name: string): Promise<{ tenant: Tenant; session: HttpSession }> {
    const tenant = await createTenant(admin, name);
    await admin.client.provisionTreasury({ orgId: tenant.orgId }, admin.auth);
    await createUser(admin, tenant.orgId, `${name}@example.com`, 'viewer', PASSWORD);
    return { tenant, session: await httpSignIn(s.url, `${name}@example.com`, PASSWORD) };
  }

  /** Every page from `path` on, following "Next page": each page's row times and types. */
  async function pages(session: HttpSession, path: string): Promise<Array<{ times: string[]; types: string[]; text: string }>> {
    const out = [];
    for (let next: string | undefined = path; next !== undefined;) {
      const text = await (await dashboardFetch(s.url, session, next)).text();
      out.push({
        text,
        times: [...text.matchAll(/<td class="c-time[^"]*"><time datetime="([^"]+)"/g)].map((m) => m[1]!),
        types: [...text.matchAll(/<td class="c-type[^"]*">([^<]*)<\/td>/g)].map((m) => m[1]!),
      });
      next = /href="([^"]+)" rel="next"/.exec(text)?.[1]?.replace(/&amp;/g, '&');
    }
    return out;
  }

  test('behavior: pings between the rows of every page are skipped without losing or repeating a row', async () => {
    const { tenant, session } = await quietOrg('interleaved');
    // 60 refusals (the new agent's policy allows nothing), each with a ping just after it.
    for (let i = 0; i < 60; i++) {
      offset = -(i + 1) * PING_GAP;
      expect((await postSign(s.url, tenant.apiKey, pay(tenant.agentId, '1'))).status).toBe(403);
      offset = 0;
      await pingAt((i + 1) * PING_GAP - MIN, tenant.apiKey, tenant.agentId);
    }
    const hidden = await pages(session, '/dashboard/transactions');
    expect(hidden.map((x) => x.times.length)).toEqual([50, 10]);
    const times = hidden.flatMap((x) => x.times);
    expect(new Set(times).size).toBe(60);
    expect(times).toEqual([...times].sort().reverse());
    expect(hidden.flatMap((x) => x.types).every((t) => t === 'eip3009')).toBe(true);
    const shown = await pages(session, '/dashboard/transactions?pings=1');
    expect(shown.map((x) => x.times.length)).toEqual([50, 50, 20]);
    expect(shown.flatMap((x) => x.types).filter((t) => t === 'ping')).toHaveLength(60);
  });

  test('behavior: a run of more pings than one view reads ends the page early, and the next page reads on', async () => {
    const { tenant, session } = await quietOrg('heartbeats');
    offset = -40 * DAY;
    expect((await postSign(s.url, tenant.apiKey, pay(tenant.agentId, '1'))).status).toBe(403);
    offset = 0;
    // 5 agents pinging at 405 moments: 2,025 pings, newer than the one refusal. The rows a ping
    // records are written through the store in one write (what /api/ping writes is tested with
    // the ping itself); what is tested here is how the ledger pages over them.
    const agents = [tenant.agentId, ...await Promise.all([1, 2, 3, 4].map((i) => createAgent(admin, tenant.orgId, `heartbeat-${i}`)))];
    const now = Date.now();
    await s.app.deps.uow.write(async (tx) => {
      for (let i = 0; i < 405; i++) {
        for (const agentId of agents) {
          const createdAt = now - (i + 1) * PING_GAP;
          await tx.transactions.insert({
            id: newUuid(createdAt), orgId: tenant.orgId, agentId, type: 'ping', status: 'recorded', chainId: 0, recipient: '',
            amountMicros: 0n, reason: '', serviceSlug: '', approvalId: null, createdAt,
          });
        }
      }
    });
    const all = await pages(session, '/dashboard/transactions');
    expect(all.map((x) => x.times.length)).toEqual([0, 1]);
    expect(all[0]!.text).toContain('Only pings so far; the next page reads on.');
    expect(all[0]!.text).toContain('2,000 pings hidden; this page stops after 2,000 rows read, the next page reads on.');
    expect(all[1]!.types).toEqual(['eip3009']);
    expect(all[1]!.text).toContain('25 pings hidden.');
  }, 120_000);
});
