import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { approvalStatus as approvalStatusCodec, agentStatus as agentStatusCodec } from '../../src/protoMapping/enums.js';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createUser, httpSignIn, signInForm, type HttpSession } from './helpers.js';

/**
 * Dashboard forms are read the one way their sender meant, or refused: a field given twice (which
 * the handler would read as its first value, so `spend_cap_usd=10&spend_cap_usd=999999` saved 10)
 * is a 400 naming it and nothing changes, on every form, the sign-in and the registry import
 * included; and an amount with blanks around it is refused as the API refuses it.
 */

const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';
const OTHER = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const PASSWORD = 'long enough password';
let s: TestServer;
let admin: Admin;
let owner: HttpSession;
let approver: HttpSession;
let agentCount = 0;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = adminFor(s);
  await setPolicy(admin, s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '1' });
  await Promise.all([
    createUser(admin, s.bootstrap.org_id, 'owner@example.com', 'owner', PASSWORD),
    createUser(admin, s.bootstrap.org_id, 'approver@example.com', 'approver', PASSWORD),
  ]);
  [owner, approver] = await Promise.all([httpSignIn(s.url, 'owner@example.com', PASSWORD), httpSignIn(s.url, 'approver@example.com', PASSWORD)]);
});
afterAll(async () => s?.close());

async function newAgent(): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, `form-fields-${++agentCount}`);
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '7', thresholdUsd: '1' });
  return agentId;
}

async function agentOf(agentId: string) {
  return (await admin.client.getAgent({ agentId }, admin.auth)).agent!;
}

/** POSTs urlencoded `pairs` in the given order (names may repeat) with the session's cookie and token. */
function postPairs(session: HttpSession, path: string, pairs: Array<[string, string]>): Promise<Response> {
  return fetch(`${s.url}${path}`, {
    method: 'POST', redirect: 'manual',
    headers: { cookie: session.cookie, 'content-type': 'application/x-www-form-urlencoded', connection: 'close' },
    body: new URLSearchParams([['_csrf', session.csrf], ...pairs]),
  });
}

async function expectRepeated(r: Response, name: string): Promise<void> {
  expect(r.status, name).toBe(400);
  expect(await r.text(), name).toContain(`Form field &quot;${name}&quot; was given more than once: nothing was changed.`);
}

async function pendingApproval(idem: string): Promise<string> {
  const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: s.bootstrap.agent_id, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: '2' }, idem);
  expect(r.status, r.text).toBe(202);
  return r.json.approval_request_id as string;
}

async function approvalState(id: string) {
  const a = (await admin.client.listApprovals({ orgId: s.bootstrap.org_id }, admin.auth)).approvals.find((x) => x.id === id)!;
  return { status: approvalStatusCodec.fromProto(a.status), note: a.note };
}

describe('a form field given more than once', () => {
  test('error: the policy form with two spend caps, thresholds, fee ceilings or allowlists is 400 naming the field, and the policy stays', async () => {
    const agentId = await newAgent();
    const base: Record<string, string> = { allowlist: RECIPIENT, spend_cap_usd: '10', approval_threshold_usd: '1', max_network_fee_eth: '0.001' };
    for (const [name, second] of [['spend_cap_usd', '999999'], ['approval_threshold_usd', '50'], ['max_network_fee_eth', '5'], ['allowlist', OTHER]] as const) {
      const pairs: Array<[string, string]> = Object.entries(base);
      pairs.push([name, second]);
      await expectRepeated(await postPairs(owner, `/dashboard/agents/${agentId}/policy`, pairs), name);
    }
    const policy = (await agentOf(agentId)).policy!;
    expect([policy.allowlist, policy.spendCapUsd, policy.approvalThresholdUsd]).toEqual([[RECIPIENT.toLowerCase()], '7', '1']);
    // The same form with each field once is saved.
    expect((await postPairs(owner, `/dashboard/agents/${agentId}/policy`, Object.entries(base))).status).toBe(303);
    expect((await agentOf(agentId)).policy!.spendCapUsd).toBe('10');
  });

  test('error: two statuses are 400 and the agent stays active; the same field twice with one value too', async () => {
    const agentId = await newAgent();
    await expectRepeated(await postPairs(owner, `/dashboard/agents/${agentId}/status`, [['status', 'paused'], ['status', 'active']]), 'status');
    await expectRepeated(await postPairs(owner, `/dashboard/agents/${agentId}/status`, [['status', 'paused'], ['status', 'paused']]), 'status');
    await expectRepeated(await postPairs(owner, `/dashboard/agents/${agentId}/status`, [['status', 'paused'], ['back', 'list'], ['back', 'page']]), 'back');
    expect(agentStatusCodec.fromProto((await agentOf(agentId)).status)).toBe('active');
  });

  test('error: an approval decision with two notes or two decisions is 400 and decides nothing', async () => {
    const id = await pendingApproval('form-fields-decide-1');
    await expectRepeated(await postPairs(approver, `/dashboard/approvals/${id}/decide`, [['decision', 'deny'], ['note', ''], ['note', 'x']]), 'note');
    await expectRepeated(await postPairs(approver, `/dashboard/approvals/${id}/decide`, [['decision', 'approve'], ['decision', 'deny'], ['note', '']]), 'decision');
    expect(await approvalState(id)).toEqual({ status: 'pending', note: '' });
    expect((await postPairs(approver, `/dashboard/approvals/${id}/decide`, [['decision', 'deny'], ['note', 'once']])).status).toBe(303);
    expect(await approvalState(id)).toEqual({ status: 'denied', note: 'once' });
  });

  test('error: two CSRF tokens are 400, even when the first is the right one', async () => {
    const agentId = await newAgent();
    const r = await fetch(`${s.url}/dashboard/agents/${agentId}/status`, {
      method: 'POST', redirect: 'manual',
      headers: { cookie: owner.cookie, 'content-type': 'application/x-www-form-urlencoded', connection: 'close' },
      body: new URLSearchParams([['_csrf', owner.csrf], ['_csrf', 'other'], ['status', 'paused']]),
    });
    await expectRepeated(r, '_csrf');
    expect(agentStatusCodec.fromProto((await agentOf(agentId)).status)).toBe('active');
  });

  test('error: the registry import with the json field twice, or as a field and a file, is 400 and imports nothing', async () => {
    const record = (slug: string) => JSON.stringify([{ slug, name: slug, paymentMethods: [{ realm: '', baseUrl: `https://${slug}.example.com`, protocol: 'x402' }] }]);
    const boundary = 'XformFieldsBoundary';
    const part = (name: string, value: string, filename?: string) =>
      `--${boundary}\r\nContent-Disposition: form-data; name="${name}"${filename ? `; filename="${filename}"` : ''}\r\n\r\n${value}\r\n`;
    for (const [slugs, body] of [
      [['twice-a', 'twice-b'], part('_csrf', owner.csrf) + part('json', record('twice-a')) + part('json', record('twice-b'))],
      [['file-a', 'file-b'], part('_csrf', owner.csrf) + part('json', record('file-a')) + part('json', record('file-b'), 'records.json')],
    ] as const) {
      const r = await fetch(`${s.url}/dashboard/services/import`, {
        method: 'POST', redirect: 'manual', body: `${body}--${boundary}--\r\n`,
        headers: { cookie: owner.cookie, 'content-type': `multipart/form-data; boundary=${boundary}`, connection: 'close' },
      });
      await expectRepeated(r, 'json');
      const listed = (await admin.client.listServices({}, admin.auth)).services.map((x) => x.slug);
      for (const slug of slugs) expect(listed, slug).not.toContain(slug);
    }
  });

  test('error: a sign-in form with two emails or two passwords is 400 and signs no one in', async () => {
    for (const pairs of [
      [['email', 'someone@example.com'], ['email', 'owner@example.com'], ['password', PASSWORD]],
      [['email', 'owner@example.com'], ['password', 'wrong password'], ['password', PASSWORD]],
    ] as Array<Array<[string, string]>>) {
      const form = await signInForm(s.url);
      const r = await fetch(`${s.url}/dashboard/sign-in`, {
        method: 'POST', redirect: 'manual',
        headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded', connection: 'close' },
        body: new URLSearchParams([['_csrf', form.token], ...pairs]),
      });
      expect(r.status).toBe(400);
      expect(r.headers.getSetCookie().some((c) => c.startsWith('pp_session='))).toBe(false);
    }
  });
});

describe('USD amounts on the policy form', () => {
  test.each([' 10', '10 ', '\t10', '10\n'])('error: a spend cap %j with blanks around it is a 400 on the field, and nothing is written', async (cap) => {
    const agentId = await newAgent();
    const r = await postPairs(owner, `/dashboard/agents/${agentId}/policy`, [['allowlist', RECIPIENT], ['spend_cap_usd', cap], ['approval_threshold_usd', '1']]);
    expect(r.status).toBe(400);
    const html = await r.text();
    expect(html).toContain('Spend cap must be a non-negative decimal number with at most 6 decimal places');
    expect(html).toMatch(/id="spend-cap"[^>]*aria-invalid="true"/);
    expect((await agentOf(agentId)).policy!.spendCapUsd).toBe('7');
  });

  test('error: an approval threshold with blanks around it is refused the same way', async () => {
    const agentId = await newAgent();
    const r = await postPairs(owner, `/dashboard/agents/${agentId}/policy`, [['allowlist', RECIPIENT], ['spend_cap_usd', '10'], ['approval_threshold_usd', ' 1']]);
    expect(r.status).toBe(400);
    expect(await r.text()).toContain('Approval above must be a non-negative decimal number with at most 6 decimal places');
    expect((await agentOf(agentId)).policy!.spendCapUsd).toBe('7');
  });
});
