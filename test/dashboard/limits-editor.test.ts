import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService } from '../../gen/paypolicy/v1/admin_pb.js';
import type { SpendLimit } from '../../gen/paypolicy/v1/admin_pb.js';
import { createAgent, createTenant, type Admin, type Tenant } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { bearer } from '../helpers/rpc.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createUser, dashboardFetch, httpSignIn, type HttpSession } from './helpers.js';

/**
 * Window limits in the dashboard over plain HTTP against the real server: the rows of the agent's
 * policy form and of the organization's limits on the Spend page (saved whole, refused whole with
 * the row and field named), who may edit them, each limit drawn on the Spend page as meters with
 * its numbers, and the policy history with what each version changed.
 */

const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';
const PASSWORD = 'long enough password';
let s: TestServer;
let admin: Admin;
/** An organization of its own, so its limits and spend are this file's alone. */
let t: Tenant;
let owner: HttpSession;
let approver: HttpSession;
let viewer: HttpSession;
/** An owner of the bootstrap organization: another tenant. */
let stranger: HttpSession;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  t = await createTenant(admin, 'limits-org');
  await admin.client.provisionTreasury({ orgId: t.orgId }, admin.auth);
  await Promise.all([
    createUser(admin, t.orgId, 'owner@limits.example', 'owner', PASSWORD),
    createUser(admin, t.orgId, 'approver@limits.example', 'approver', PASSWORD),
    createUser(admin, t.orgId, 'viewer@limits.example', 'viewer', PASSWORD),
    createUser(admin, s.bootstrap.org_id, 'stranger@example.com', 'owner', PASSWORD),
  ]);
  [owner, approver, viewer, stranger] = await Promise.all([
    httpSignIn(s.url, 'owner@limits.example', PASSWORD),
    httpSignIn(s.url, 'approver@limits.example', PASSWORD),
    httpSignIn(s.url, 'viewer@limits.example', PASSWORD),
    httpSignIn(s.url, 'stranger@example.com', PASSWORD),
  ]);
});
afterAll(async () => s?.close());

/** One row of the form, as typed; a field left out is empty. */
type Row = Partial<{ window: string; usd: string; count: string; fee: string; recipient: string }>;

/** The five fields of each row, in row order, as the page posts them. */
function rowFields(rows: Row[]): Array<[string, string]> {
  return rows.flatMap((r) => [
    ['limit_window', r.window ?? ''], ['limit_max_usd', r.usd ?? ''], ['limit_max_count', r.count ?? ''], ['limit_max_fee_eth', r.fee ?? ''], ['limit_recipient', r.recipient ?? ''],
  ] as Array<[string, string]>);
}

/** The policy form as an owner posts it: allow RECIPIENT, cap `cap`, approval above $4, these rows, then `extra`. */
function postPolicy(session: HttpSession, agentId: string, rows: Row[], extra: Array<[string, string]> = [], cap = '10') {
  return dashboardFetch(s.url, session, `/dashboard/agents/${agentId}/policy`, {
    form: [['_csrf', session.csrf], ['allowlist', RECIPIENT], ['spend_cap_usd', cap], ['approval_threshold_usd', '4'], ...rowFields(rows), ...extra],
  });
}

function postOrgLimits(session: HttpSession, rows: Row[], extra: Array<[string, string]> = []) {
  return dashboardFetch(s.url, session, '/dashboard/organization/limits', { form: [['_csrf', session.csrf], ...rowFields(rows), ...extra] });
}

/** A limit as the API returns it, without the fields it leaves unset. */
function plain(l: SpendLimit) {
  return Object.fromEntries(Object.entries({ window: l.window, maxUsd: l.maxUsd, maxCount: l.maxCount, maxNetworkFeeWei: l.maxNetworkFeeWei, recipient: l.recipient }).filter(([, v]) => v !== undefined));
}

async function agentPolicy(agentId: string) {
  return (await admin.client.getAgent({ agentId }, admin.auth)).agent!.policy!;
}

async function orgLimits(orgId = t.orgId) {
  return (await admin.client.listOrganizations({}, admin.auth)).organizations.find((o) => o.id === orgId)!.limits.map(plain);
}

async function page(session: HttpSession, path: string): Promise<string> {
  return (await dashboardFetch(s.url, session, path)).text();
}

/** The field errors of a page: input id → message. */
function fieldErrors(text: string): Record<string, string> {
  return Object.fromEntries([...text.matchAll(/<p class="field-error" id="([^"]+)-error">([^<]*)<\/p>/g)].map((m) => [m[1]!, m[2]!]));
}

describe('policy form: window limit rows', () => {
  test('behavior: rows are saved with the policy in one change, the fee typed in ETH; saved rows come back with one empty row to add another', async () => {
    const id = await createAgent(admin, t.orgId, 'rows-save');
    const r = await postPolicy(owner, id, [{ window: '1h', usd: '5', count: '30' }, {}, { window: '7d', fee: '0.002', recipient: 'weather' }], [], '12');
    expect([r.status, r.headers.get('location')]).toEqual([303, `/dashboard/agents/${id}`]);
    const policy = await agentPolicy(id);
    expect([policy.spendCapUsd, policy.version]).toEqual(['12', 2]);
    expect(policy.limits.map(plain)).toEqual([
      { window: '1h', maxUsd: '5', maxCount: 30 },
      { window: '7d', maxNetworkFeeWei: '2000000000000000', recipient: 'weather' },
    ]);
    const text = await page(owner, `/dashboard/agents/${id}`);
    expect([...text.matchAll(/name="limit_window" value="([^"]*)"/g)].map((m) => m[1])).toEqual(['1h', '7d', '']);
    expect(text).toContain('id="limit-2-fee" name="limit_max_fee_eth" value="0.002"');
    expect(text).toContain('<legend>Limit 3</legend>');
  });

  test('behavior: a ticked Remove box and emptied rows leave limits out; rows all empty remove every limit; a form without rows keeps them', async () => {
    const id = await createAgent(admin, t.orgId, 'rows-remove');
    await postPolicy(owner, id, [{ window: '1h', usd: '5' }, { window: '1d', count: '3' }, { window: '30d', usd: '100' }]);
    expect((await postPolicy(owner, id, [{ window: '1h', usd: '5' }, { window: '1d', count: '3' }, { window: '30d', usd: '100' }], [['limit_remove', '2']])).status).toBe(303);
    expect((await agentPolicy(id)).limits.map(plain)).toEqual([{ window: '1h', maxUsd: '5' }, { window: '30d', maxUsd: '100' }]);
    // A removed row is not checked: what it holds does not matter.
    expect((await postPolicy(owner, id, [{ window: 'weekly', usd: '5' }, { window: '30d', usd: '100' }], [['limit_remove', '1']])).status).toBe(303);
    expect((await agentPolicy(id)).limits.map(plain)).toEqual([{ window: '30d', maxUsd: '100' }]);
    expect((await postPolicy(owner, id, [])).status).toBe(303);
    expect((await agentPolicy(id)).limits.map(plain)).toEqual([{ window: '30d', maxUsd: '100' }]);
    expect((await postPolicy(owner, id, [{}])).status).toBe(303);
    expect((await agentPolicy(id)).limits).toEqual([]);
  });

  test('error: invalid_argument: every wrong field is named by its row and label, kept as typed, and nothing is saved', async () => {
    const id = await createAgent(admin, t.orgId, 'rows-refused');
    await postPolicy(owner, id, [{ window: '1h', usd: '5' }]);
    const before = await agentPolicy(id);
    const r = await postPolicy(owner, id, [
      { window: '1h', usd: '5' },
      { window: 'weekly', usd: '3' },
      { window: '1d', usd: '-1', count: 'ten' },
      { window: '2h', fee: '-0.1', recipient: '0x1234' },
      { window: '30m' },
      { usd: '2' },
    ], [], '99');
    expect(r.status).toBe(400);
    const text = await r.text();
    expect(fieldErrors(text)).toEqual({
      'limit-2-window': 'Limit 2: window must be a window like &quot;30m&quot;, &quot;1h&quot; or &quot;7d&quot;: a whole number of minutes (m), hours (h) or days (d) from 1m to 366d',
      'limit-3-usd': 'Limit 3: max USD must be a non-negative decimal number with at most 6 decimal places',
      'limit-3-count': 'Limit 3: max payments must be a whole number from 0 to 1000000000',
      'limit-4-fee': 'Limit 4: max fees must be an amount of ETH such as 0.001',
      'limit-4-recipient': 'Limit 4: recipient must be a 0x address or a registry service slug',
      'limit-5-usd': 'Limit 5 limits nothing: give it a max USD, max payments or max fees',
      'limit-6-window': 'Limit 6: window must be a window like &quot;30m&quot;, &quot;1h&quot; or &quot;7d&quot;: a whole number of minutes (m), hours (h) or days (d) from 1m to 366d',
    });
    // The summary links each message to its field; the fields keep what was typed.
    expect(text).toContain('<li><a href="#limit-3-count">Limit 3: max payments must be a whole number from 0 to 1000000000</a></li>');
    expect(text).toContain('id="limit-2-window" name="limit_window" value="weekly" spellcheck="false" autocomplete="off" aria-invalid="true" aria-describedby="limit-2-window-error"');
    expect(text).toContain('name="spend_cap_usd" value="99"');
    expect(await agentPolicy(id)).toEqual(before);
  });

  test('behavior: "Add a limit row" answers the form as typed with one more row, and saves nothing', async () => {
    const id = await createAgent(admin, t.orgId, 'rows-add');
    const r = await postPolicy(owner, id, [{ window: '1h', usd: '5' }], [['limit_add', '1']], '77');
    expect(r.status).toBe(200);
    const text = await r.text();
    expect([...text.matchAll(/name="limit_window" value="([^"]*)"/g)].map((m) => m[1])).toEqual(['1h', '']);
    expect(text).toContain('name="spend_cap_usd" value="77"');
    expect((await agentPolicy(id)).version).toBe(1);
  });

  test('behavior: "Preview" answers the form as typed with what the policy would have decided of the agent\'s requests, and saves nothing', async () => {
    // An organization of its own: its payments must not show in this file's other spend.
    const own = await createTenant(admin, 'preview-org');
    await admin.client.provisionTreasury({ orgId: own.orgId }, admin.auth);
    await createUser(admin, own.orgId, 'owner@preview.example', 'owner', PASSWORD);
    const ownOwner = await httpSignIn(s.url, 'owner@preview.example', PASSWORD);
    const id = own.agentId;
    await postPolicy(ownOwner, id, [], [], '100');
    for (const amount of ['2', '2', '3']) expect((await postSign(s.url, own.apiKey, { agent_id: id, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: amount })).status).toBe(200);
    const before = await agentPolicy(id);
    const r = await postPolicy(ownOwner, id, [{ window: '1h', usd: '4' }], [['preview', '1']], '100');
    expect(r.status).toBe(200);
    const text = await r.text();
    expect(text).toContain('Of 3 payment requests, this policy would allow 2, send 0 for approval and deny 1; 1 would change.');
    expect(text).toContain("Payment of $3 would exceed the agent&#39;s 1h limit of $4: $4 already spent in the last hour");
    expect([...text.matchAll(/name="limit_window" value="([^"]*)"/g)].map((m) => m[1])).toEqual(['1h']);
    expect(await agentPolicy(id)).toEqual(before);
    // Another organization's owner cannot preview it: the agent is not theirs.
    expect((await postPolicy(owner, id, [{ window: '1h', usd: '4' }], [['preview', '1']])).status).toBe(404);
  });

  test('error: rows that cannot come from the page (columns of different lengths, a Remove box of no row, a field given twice elsewhere) change nothing', async () => {
    const id = await createAgent(admin, t.orgId, 'rows-malformed');
    const before = await agentPolicy(id);
    const short = await postPolicy(owner, id, [{ window: '1h', usd: '5' }], [['limit_window', '2h']]);
    expect(short.status).toBe(400);
    expect(await short.text()).toContain('The limit rows arrived incomplete: nothing was changed.');
    const remove = await postPolicy(owner, id, [{ window: '1h', usd: '5' }], [['limit_remove', '2']]);
    expect(remove.status).toBe(400);
    expect(await remove.text()).toContain('A Remove box names no limit row: nothing was changed.');
    const twice = await postPolicy(owner, id, [{ window: '1h', usd: '5' }], [['spend_cap_usd', '999999']]);
    expect(twice.status).toBe(400);
    expect(await twice.text()).toContain('Form field &quot;spend_cap_usd&quot; was given more than once');
    expect(await agentPolicy(id)).toEqual(before);
  });

  test('error: an approver or a viewer cannot save rows (403); another organization\'s owner gets 404; nothing changes', async () => {
    const id = await createAgent(admin, t.orgId, 'rows-roles');
    await postPolicy(owner, id, [{ window: '1h', usd: '5' }]);
    const before = await agentPolicy(id);
    for (const session of [approver, viewer]) {
      expect((await postPolicy(session, id, [{ window: '1d', usd: '1' }])).status).toBe(403);
    }
    expect((await postPolicy(stranger, id, [{ window: '1d', usd: '1' }])).status).toBe(404);
    expect((await dashboardFetch(s.url, stranger, `/dashboard/agents/${id}`)).status).toBe(404);
    expect(await agentPolicy(id)).toEqual(before);
    // The viewer reads the limits, without a form.
    const text = await page(viewer, `/dashboard/agents/${id}`);
    expect(text).not.toContain('name="limit_window"');
    expect(text).toMatch(/<tr><td>This agent<\/td><td>1h<\/td><td>every recipient<\/td>\s*<td>\$5\.00<\/td>/);
  });
});

describe('organization limits on the Spend page', () => {
  test('behavior: an owner saves them through the organization\'s use case; the agent page shows them read-only', async () => {
    try {
      const r = await postOrgLimits(owner, [{ window: '30d', usd: '200' }, { window: '1h', count: '50', recipient: RECIPIENT }, {}]);
      expect([r.status, r.headers.get('location')]).toEqual([303, '/dashboard/spend#org-limits']);
      expect(await orgLimits()).toEqual([{ window: '30d', maxUsd: '200' }, { window: '1h', maxCount: 50, recipient: RECIPIENT.toLowerCase() }]);
      const spend = await page(owner, '/dashboard/spend');
      expect(spend).toContain('Organization limits saved.');
      expect([...spend.matchAll(/id="org-limit-\d+-window" name="limit_window" value="([^"]*)"/g)].map((m) => m[1])).toEqual(['30d', '1h', '']);
      const agent = await page(owner, `/dashboard/agents/${t.agentId}`);
      expect(agent).toContain("<h2 id=\"limits-heading\">Organization&#39;s window limits</h2>");
      expect(agent).toMatch(/<tr><td>Organization<\/td><td>30d<\/td><td>every recipient<\/td>\s*<td>\$200\.00<\/td>/);
    } finally {
      await admin.client.updateOrganization({ orgId: t.orgId, limits: { items: [] } }, admin.auth);
    }
  });

  test('error: invalid_argument: a wrong row is named and nothing is saved', async () => {
    await admin.client.updateOrganization({ orgId: t.orgId, limits: { items: [{ window: '7d', maxUsd: '70' }] } }, admin.auth);
    try {
      const r = await postOrgLimits(owner, [{ window: '7d', usd: '70' }, { window: '400d', usd: '1' }]);
      expect(r.status).toBe(400);
      expect(fieldErrors(await r.text())).toEqual({
        'org-limit-2-window': 'Limit 2: window must be a window like &quot;30m&quot;, &quot;1h&quot; or &quot;7d&quot;: a whole number of minutes (m), hours (h) or days (d) from 1m to 366d',
      });
      expect(await orgLimits()).toEqual([{ window: '7d', maxUsd: '70' }]);
      const none = await dashboardFetch(s.url, owner, '/dashboard/organization/limits', { form: { _csrf: owner.csrf } });
      expect(none.status).toBe(400);
      expect(await none.text()).toContain('The form carried no limit rows: nothing was changed.');
      expect(await orgLimits()).toEqual([{ window: '7d', maxUsd: '70' }]);
    } finally {
      await admin.client.updateOrganization({ orgId: t.orgId, limits: { items: [] } }, admin.auth);
    }
  });

  test('error: only owners edit them: an approver or a viewer gets 403 and sees them without a form; another organization\'s owner edits only their own', async () => {
    await admin.client.updateOrganization({ orgId: t.orgId, limits: { items: [{ window: '7d', maxUsd: '70' }] } }, admin.auth);
    try {
      for (const session of [approver, viewer]) {
        expect((await postOrgLimits(session, [{ window: '1d', usd: '1' }])).status).toBe(403);
        const spend = await page(session, '/dashboard/spend');
        expect(spend).not.toContain('action="/dashboard/organization/limits"');
        expect(spend).toMatch(/<h2 id="org-limits-heading">Organization limits<\/h2>[\s\S]*<tr><td>7d<\/td><td>every recipient<\/td>\s*<td>\$70\.00<\/td>/);
      }
      expect((await postOrgLimits(stranger, [{ window: '1d', usd: '1' }])).status).toBe(303);
      expect(await orgLimits()).toEqual([{ window: '7d', maxUsd: '70' }]);
      expect(await orgLimits(s.bootstrap.org_id)).toEqual([{ window: '1d', maxUsd: '1' }]);
    } finally {
      await admin.client.updateOrganization({ orgId: t.orgId, limits: { items: [] } }, admin.auth);
      await admin.client.updateOrganization({ orgId: s.bootstrap.org_id, limits: { items: [] } }, admin.auth);
    }
  });
});

describe('spend page: every limit as a meter', () => {
  test('behavior: the cap, the agent\'s limits and the organization\'s, each with its numbers in text and a meter named by them', async () => {
    const id = await createAgent(admin, t.orgId, 'metered');
    await postPolicy(owner, id, [{ window: '1h', usd: '5', count: '3' }, { window: '1d', count: '10', recipient: 'weather' }]);
    await admin.client.updateOrganization({ orgId: t.orgId, limits: { items: [{ window: '30d', maxUsd: '200', maxNetworkFeeWei: '1000000000000000' }] } }, admin.auth);
    try {
      for (const amount of ['2', '1.5']) {
        const r = await postSign(s.url, t.apiKey, { agent_id: id, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: amount });
        expect(r.status, r.text).toBe(200);
      }
      const text = await page(viewer, '/dashboard/spend');
      const block = text.slice(text.indexOf(`id="agent-${id}"`), text.indexOf('</section>', text.indexOf(`id="agent-${id}"`)));
      const limits = [...block.matchAll(/<p class="limit-title" id="([^"]+)">([^<]+)<\/p>/g)].map((m) => [m[1], m[2]]);
      const base = `limit-use-${id}`;
      expect(limits).toEqual([
        [`${base}-0`, 'Spend cap, the last 24 hours'],
        [`${base}-1`, 'Agent&#39;s limit, the last hour'],
        [`${base}-2`, 'Agent&#39;s limit, the last day, payments to weather'],
        [`${base}-3`, 'Organization&#39;s limit, the last 30 days'],
      ]);
      const meters = [...block.matchAll(/<meter id="([^"]+)" min="0" max="([^"]+)" low="[^"]+" high="[^"]+" optimum="0" value="([^"]+)" aria-labelledby="([^"]+)"><\/meter><span id="([^"]+)">([^<]+)<\/span>/g)]
        .map((m) => ({ id: m[1], max: m[2], value: m[3], labelledBy: m[4], textId: m[5], text: m[6] }));
      expect(meters.map((m) => [m.id, m.value, m.max, m.text])).toEqual([
        [`${base}-0-usd`, '3.5', '10', '$3.50 of $10.00 · $6.50 left'],
        [`${base}-1-usd`, '3.5', '5', '$3.50 of $5.00 · $1.50 left'],
        [`${base}-1-count`, '2', '3', '2 of 3 payments · 1 left'],
        [`${base}-2-count`, '0', '10', '0 of 10 payments · 10 left'],
        [`${base}-3-usd`, '3.5', '200', '$3.50 of $200.00 · $196.50 left'],
        [`${base}-3-fee`, '0', '0.001', '0 of 0.001 ETH of network fees'],
      ]);
      for (const m of meters) expect(m.labelledBy).toBe(`${m.id!.replace(/-(usd|count|fee)$/, '')} ${m.textId}`);
    } finally {
      await admin.client.updateOrganization({ orgId: t.orgId, limits: { items: [] } }, admin.auth);
    }
  });
});

describe('agent page: policy history', () => {
  test('behavior: versions newest first with who made each and what it changed', async () => {
    const id = await createAgent(admin, t.orgId, 'historied');
    await setPolicy(admin, id, { allowlist: [RECIPIENT, 'weather'], capUsd: '10', thresholdUsd: '2' });
    expect((await postPolicy(owner, id, [{ window: '1h', usd: '5', count: '3' }], [], '12')).status).toBe(303);
    expect((await postPolicy(owner, id, [{ window: '1h', usd: '6', count: '3' }], [], '12')).status).toBe(303);
    expect((await postPolicy(owner, id, [{ window: '1h', usd: '6', count: '3' }], [], '12')).status).toBe(303);
    const text = await page(viewer, `/dashboard/agents/${id}`);
    const history = text.slice(text.indexOf('<h2 id="history-heading">'));
    const versions = [...history.matchAll(/<li><h3>Version (\d+)<\/h3>\n<p class="small muted">[^<]+ · ([^<]+)<\/p>\n([\s\S]*?)<\/li>\n?(?=<li><h3>|<\/ol>)/g)]
      .map((m) => [Number(m[1]), m[2], [...m[3]!.matchAll(/<li>(.*?)<\/li>/g)].map((c) => c[1]!.replace(/<\/?code>/g, '')).concat(m[3]!.includes('<ul') ? [] : [m[3]!.replace(/<[^>]+>/g, '').trim()])]);
    expect(versions).toEqual([
      [5, 'dashboard user owner@limits.example', ['Saved without a change.']],
      [4, 'dashboard user owner@limits.example', ['Limit added: 1h, $6.00, 3 payments', 'Limit removed: 1h, $5.00, 3 payments']],
      [3, 'dashboard user owner@limits.example', ['No longer allowed weather', 'Spend cap: $10.00 → $12.00', 'Approval above: $2.00 → $4.00', 'Limit added: 1h, $5.00, 3 payments']],
      [2, 'admin token', [`Allowed ${RECIPIENT.toLowerCase()}`, 'Allowed weather', 'Spend cap: $0.00 → $10.00', 'Approval above: $0.00 → $2.00']],
      [1, 'admin token', ['The first version kept.']],
    ]);
    expect(history).not.toContain('lists every one');
  });

  test('behavior: the latest 20 versions, with a note of how many there are', async () => {
    const id = await createAgent(admin, t.orgId, 'long-history');
    for (let i = 1; i <= 22; i++) await setPolicy(admin, id, { allowlist: [], capUsd: String(i), thresholdUsd: '0' });
    const text = await page(owner, `/dashboard/agents/${id}`);
    expect([...text.matchAll(/<h3>Version (\d+)<\/h3>/g)].map((m) => Number(m[1]))).toEqual(Array.from({ length: 20 }, (_, i) => 23 - i));
    expect(text).toContain(`The latest 20 of 23 versions; <code>paypolicy policy history --agent ${id}</code> lists every one.`);
    expect(text).toContain('Spend cap: $21.00 → $22.00');
  });
});
