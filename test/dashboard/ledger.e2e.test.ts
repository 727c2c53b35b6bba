import { getAddress } from 'viem';
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
 * The transactions page and the decisions table in headless Chromium against the real server,
 * with the longest things a ledger holds: an agent name of several words and one of a single long
 * word, a nine-digit amount, reasons quoting a whole address, long notes with a link. At laptop
 * widths the ledger fits its box and every reason is whole and wraps between words; on a phone
 * every decision's recipient is on screen.
 */

const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';
const OTHER_RECIPIENT = '0x7a16fF8270133F063aAb6C9977183D9e72835428';
const STRANGER = '0x5fbDB2315678afecb367f032d93F642f64180aa3';
const MIN = 60_000;
const PASSWORD = 'ledger-passphrase-42';
const OWNER = 'olivia@example.com';
/** Pings record a row at most once per agent per 10 minutes (app/ping.ts); these are further apart. */
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
      for (const path of ['/dashboard/transactions']) {
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
