import { Code } from '@connectrpc/connect';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createAgent, createTenant, type Admin, type Tenant } from './helpers/admin.js';
import { runCliInProcess } from './helpers/cliInProcess.js';
import { postSign, recoverAuthorizationSigner, type SignBody, type WireAuthorization } from './helpers/payments.js';
import { postSignRetrying } from './helpers/replicas.js';
import { expectRpcError } from './helpers/rpc.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

/**
 * Window limits: an agent's and its organization's rolling budgets of amount, count and network
 * fee, optionally per recipient, checked in the same atomic decision as the spend cap, named in
 * every denial (`reason` and `rule`), listed by the spend read, and set whole from a policy
 * document through the CLI.
 */

const SHOP = '0x2222222222222222222222222222222222222222';
const OTHER = '0x3333333333333333333333333333333333333333';
const HOUR = 3_600_000;

let s: TestServer;
let admin: Admin;
let offset = 0;
let files: string;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn', now: () => Date.now() + offset });
  admin = adminFor(s);
  files = mkdtempSync(join(tmpdir(), 'paypolicy-limits-'));
});
afterAll(async () => {
  rmSync(files, { recursive: true, force: true });
  await s.close();
});

const pay = (agentId: string, amountUsd: string, recipient = SHOP): SignBody =>
  ({ agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: recipient, amount_usd: amountUsd });

type LimitInit = { window: string; maxUsd?: string; maxCount?: number; maxNetworkFeeWei?: string; recipient?: string };

/** A fresh organization (its own treasury and key) so its limits bind only this test's agents. */
async function tenant(name: string, orgLimits: LimitInit[] = []): Promise<Tenant> {
  const t = await createTenant(admin, name);
  await admin.client.provisionTreasury({ orgId: t.orgId }, admin.auth);
  if (orgLimits.length > 0) await admin.client.updateOrganization({ orgId: t.orgId, limits: { items: orgLimits } }, admin.auth);
  return t;
}

/** Allows SHOP and OTHER, cap $1,000 a day, approval above $50, and the given window limits. */
async function limitPolicy(agentId: string, limits: LimitInit[], thresholdUsd = '50'): Promise<void> {
  await admin.client.setPolicy({ agentId, allowlist: [SHOP, OTHER], spendCapUsd: '1000', approvalThresholdUsd: thresholdUsd, limits: { items: limits } }, admin.auth);
}

describe('window limits', () => {
  test('behavior: an hourly amount limit denies what would exceed it, naming the limit and what is spent; the rule object says the same', async () => {
    const t = await tenant('hourly');
    await limitPolicy(t.agentId, [{ window: '1h', maxUsd: '5' }]);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '2.5'))).status).toBe(200);
    const over = await postSign(s.url, t.apiKey, pay(t.agentId, '4'), 'over-hourly');
    expect(over.status, over.text).toBe(403);
    expect(over.json).toEqual({
      error: 'Policy denied', transaction_id: expect.any(String),
      reason: "Payment of $4 would exceed the agent's 1h limit of $5: $2.5 already spent in the last hour",
      rule: { kind: 'max_usd', window: '1h', scope: 'agent', recipient: null, limit: '5', spent: '2.5' },
    });
    // The same key answers the same body, rule included.
    const again = await postSign(s.url, t.apiKey, pay(t.agentId, '4'), 'over-hourly');
    expect(again.json).toEqual(over.json);
    // Up to the limit exactly is allowed, and signed by the treasury.
    const fits = await postSign(s.url, t.apiKey, pay(t.agentId, '2.5'));
    expect(fits.status, fits.text).toBe(200);
    expect((await recoverAuthorizationSigner(fits.json.signature as Hex, fits.json.authorization as WireAuthorization)).toLowerCase())
      .toBe((await admin.client.listOrganizations({}, admin.auth)).organizations.find((o) => o.id === t.orgId)!.treasuryAddress.toLowerCase());
  });

  test('behavior: the window slides with the ledger clock: an hour later the same payment is allowed', async () => {
    const t = await tenant('sliding');
    await limitPolicy(t.agentId, [{ window: '1h', maxUsd: '5' }]);
    offset = -HOUR - 60_000;
    try {
      expect((await postSign(s.url, t.apiKey, pay(t.agentId, '5'))).status).toBe(200);
    } finally {
      offset = 0;
    }
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '5'))).status).toBe(200);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '0.01'))).status).toBe(403);
  });

  test('behavior: a count limit allows that many payments in its window, whatever their amounts', async () => {
    const t = await tenant('count');
    await limitPolicy(t.agentId, [{ window: '10m', maxCount: 2 }]);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '0.01'))).status).toBe(200);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '0.01'))).status).toBe(200);
    const third = await postSign(s.url, t.apiKey, pay(t.agentId, '0.01'));
    expect(third.status).toBe(403);
    expect(third.json.reason).toBe("Payment would exceed the agent's 10m limit of 2 payments: 2 already made in the last 10 minutes");
    expect(third.json.rule).toMatchObject({ kind: 'max_count', window: '10m', limit: '2', spent: '2' });
  });

  test('behavior: a recipient-scoped limit does not block other recipients', async () => {
    const t = await tenant('scoped');
    await limitPolicy(t.agentId, [{ window: '24h', maxUsd: '3', recipient: SHOP }]);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '3'))).status).toBe(200);
    const shop = await postSign(s.url, t.apiKey, pay(t.agentId, '1'));
    expect(shop.status).toBe(403);
    expect(shop.json.rule).toMatchObject({ kind: 'max_usd', recipient: SHOP, spent: '3' });
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '20', OTHER))).status).toBe(200);
  });

  test('behavior: an organization limit binds every agent of the organization, and no other organization', async () => {
    const t = await tenant('org-wide', [{ window: '24h', maxUsd: '10' }]);
    const second = await createAgent(admin, t.orgId, 'second');
    await limitPolicy(t.agentId, []);
    await limitPolicy(second, []);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '6'))).status).toBe(200);
    const denied = await postSign(s.url, t.apiKey, pay(second, '6'));
    expect(denied.status).toBe(403);
    expect(denied.json.reason).toBe("Payment of $6 would exceed the organization's 24h limit of $10: $6 already spent in the last 24 hours");
    expect(denied.json.rule).toMatchObject({ kind: 'max_usd', scope: 'organization', window: '24h' });
    expect((await postSign(s.url, t.apiKey, pay(second, '4'))).status).toBe(200);
    // Another organization's payments are not counted.
    const other = await tenant('org-wide-other', [{ window: '24h', maxUsd: '10' }]);
    await limitPolicy(other.agentId, []);
    expect((await postSign(s.url, other.apiKey, pay(other.agentId, '10'))).status).toBe(200);
  });

  test('behavior: a pending approval holds every limit it falls in; denying it frees them', async () => {
    const t = await tenant('pending', [{ window: '1h', maxUsd: '100' }]);
    await limitPolicy(t.agentId, [{ window: '1h', maxUsd: '60' }], '10');
    const waiting = await postSign(s.url, t.apiKey, pay(t.agentId, '40'));
    expect(waiting.status, waiting.text).toBe(202);
    expect(waiting.json.rule).toEqual({ kind: 'approval_threshold', window: null, scope: 'agent', recipient: null, limit: '10', spent: null });
    const blocked = await postSign(s.url, t.apiKey, pay(t.agentId, '30'));
    expect(blocked.status).toBe(403);
    expect(blocked.json.rule).toMatchObject({ scope: 'agent', spent: '40' });
    await admin.client.decideApproval({ id: waiting.json.approval_request_id as string, decision: Decision.DENY }, admin.auth);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '9'))).status).toBe(200);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '30'))).status).toBe(202);
  });

  test('behavior: an unanswered approval stops holding its limits when its window ends, before any sweep; windows slide across a restart', async () => {
    const clock = { now: Date.now() };
    let own = await startTestServer({ logLevel: 'warn', now: () => clock.now });
    try {
      const ownAdmin = adminFor(own);
      const t = await createTenant(ownAdmin, 'restart');
      await ownAdmin.client.provisionTreasury({ orgId: t.orgId }, ownAdmin.auth);
      await ownAdmin.client.updateOrganization({ orgId: t.orgId, approvalWindowSeconds: 600 }, ownAdmin.auth);
      await ownAdmin.client.setPolicy({ agentId: t.agentId, allowlist: [SHOP], spendCapUsd: '1000', approvalThresholdUsd: '10', limits: { items: [{ window: '1h', maxUsd: '30' }] } }, ownAdmin.auth);
      expect((await postSign(own.url, t.apiKey, pay(t.agentId, '25'))).status).toBe(202);
      expect((await postSign(own.url, t.apiKey, pay(t.agentId, '10'))).json.rule).toMatchObject({ kind: 'max_usd', spent: '25' });
      clock.now += 600_000;
      expect((await postSign(own.url, t.apiKey, pay(t.agentId, '10'))).status).toBe(200);
      await own.close({ keepData: true });
      // Restarted 59 minutes later the $10 still holds the hour; at the hour it has left.
      clock.now += 59 * 60_000;
      own = await startTestServer({ logLevel: 'warn', dataDir: own.dataDir, now: () => clock.now });
      expect((await postSign(own.url, t.apiKey, pay(t.agentId, '25'))).json.rule).toMatchObject({ kind: 'max_usd', spent: '10' });
      clock.now += 60_000;
      expect((await postSign(own.url, t.apiKey, pay(t.agentId, '10'))).status).toBe(200);
    } finally {
      await own.close();
    }
  });

  test('behavior: approving and collecting a pending payment counts it once against its limits, not twice', async () => {
    const t = await tenant('approve-once', [{ window: '1h', maxUsd: '50', maxCount: 1 }]);
    await limitPolicy(t.agentId, [{ window: '1h', maxUsd: '60', maxCount: 1 }], '10');
    const waiting = await postSign(s.url, t.apiKey, pay(t.agentId, '40'), 'approve-once');
    expect(waiting.status, waiting.text).toBe(202);
    await admin.client.decideApproval({ id: waiting.json.approval_request_id as string, decision: Decision.APPROVE }, admin.auth);
    const collected = await postSign(s.url, t.apiKey, pay(t.agentId, '40'), 'approve-once');
    expect(collected.status, collected.text).toBe(200);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '1'))).json.rule).toMatchObject({ kind: 'max_count', spent: '1' });
  });

  test('behavior: the spend read lists the cap and every limit with what its window holds', async () => {
    const t = await tenant('spend-read', [{ window: '30d', maxUsd: '200', maxCount: 50 }]);
    await limitPolicy(t.agentId, [{ window: '1h', maxUsd: '5', maxCount: 30 }, { window: '24h', maxUsd: '3', recipient: SHOP }]);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '1.25'))).status).toBe(200);
    const r = await rest(s.url, 'GET', `/api/agents/${t.agentId}/spend`, { key: t.apiKey });
    expect(r.status, r.text).toBe(200);
    expect(r.json.limits).toEqual([
      { window: '24h', scope: 'agent', recipient: null, max_usd: '1000', spent_usd: '1.25', remaining_usd: '998.75', max_count: null, count: 1, max_network_fee_wei: null, network_fee_wei: '0' },
      { window: '1h', scope: 'agent', recipient: null, max_usd: '5', spent_usd: '1.25', remaining_usd: '3.75', max_count: 30, count: 1, max_network_fee_wei: null, network_fee_wei: '0' },
      { window: '24h', scope: 'agent', recipient: SHOP, max_usd: '3', spent_usd: '1.25', remaining_usd: '1.75', max_count: null, count: 1, max_network_fee_wei: null, network_fee_wei: '0' },
      { window: '30d', scope: 'organization', recipient: null, max_usd: '200', spent_usd: '1.25', remaining_usd: '198.75', max_count: 50, count: 1, max_network_fee_wei: null, network_fee_wei: '0' },
    ]);
  });

  test('error: limits it does not understand are refused naming the key, and nothing changes', async () => {
    const t = await tenant('refused');
    await limitPolicy(t.agentId, [{ window: '1h', maxUsd: '5' }]);
    for (const [limit, message] of [
      [{ window: '90s', maxUsd: '1' }, /limits\[0\]\.window must be a window/],
      [{ window: '367d', maxUsd: '1' }, /limits\[0\]\.window/],
      [{ window: '1h', maxUsd: '-1' }, /limits\[0\]\.max_usd/],
      [{ window: '1h', maxUsd: '0.0000001' }, /limits\[0\]\.max_usd/],
      [{ window: '1h' }, /limits\[0\] limits nothing/],
      [{ window: '1h', maxUsd: '1', recipient: 'not a slug!' }, /limits\[0\]\.recipient/],
    ] as const) {
      await expectRpcError(
        admin.client.setPolicy({ agentId: t.agentId, allowlist: [SHOP], spendCapUsd: '1', approvalThresholdUsd: '1', limits: { items: [limit] } }, admin.auth),
        Code.InvalidArgument, message,
      );
    }
    const kept = (await admin.client.getAgent({ agentId: t.agentId }, admin.auth)).agent!.policy!;
    expect(kept.spendCapUsd).toBe('1000');
    expect(kept.limits.map((l) => [l.window, l.maxUsd])).toEqual([['1h', '5']]);
    await expectRpcError(admin.client.updateOrganization({ orgId: t.orgId, limits: { items: [{ window: '0m', maxUsd: '1' }] } }, admin.auth), Code.InvalidArgument, /limits\[0\]\.window/);
  });
});

describe('policy document through the CLI', () => {
  const cli = (args: string[]) => runCliInProcess([...args, '--url', s.url, '--admin-token', s.bootstrap.admin_token]);

  test('behavior: policy set --file replaces the whole policy; policy get --json prints the same document back; the 24h limit is the cap', async () => {
    const t = await tenant('document');
    const doc = {
      allow: [SHOP, 'weather'],
      approval_threshold_usd: '1',
      max_per_payment_usd: '25',
      limits: [
        { window: '1h', max_usd: '5', max_count: 30 },
        { window: '24h', max_usd: '10' },
        { window: '30d', max_usd: '200' },
        { window: '24h', max_usd: '3', recipient: 'weather' },
      ],
      max_network_fee_wei: '1000000000000000',
    };
    const path = join(files, 'policy.json');
    writeFileSync(path, JSON.stringify(doc));
    const set = await cli(['policy', 'set', '--agent', t.agentId, '--file', path]);
    expect(set.code, set.stderr).toBe(0);
    const policy = (await admin.client.getAgent({ agentId: t.agentId }, admin.auth)).agent!.policy!;
    expect(policy.spendCapUsd).toBe('10');
    expect(policy.limits).toHaveLength(3);
    const got = await cli(['policy', 'get', '--agent', t.agentId, '--json']);
    expect(got.code, got.stderr).toBe(0);
    expect(JSON.parse(got.stdout)).toEqual({ ...doc, limits: [doc.limits[1], doc.limits[0], doc.limits[2], doc.limits[3]] });
    // Unknown keys in the document are a usage error naming the key; nothing is sent.
    writeFileSync(path, JSON.stringify({ ...doc, cap: '5' }));
    const bad = await cli(['policy', 'set', '--agent', t.agentId, '--file', path]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unknown key "cap"/);
    writeFileSync(path, JSON.stringify({ ...doc, limits: [{ window: '1h', max_usd: '5', per: 'agent' }] }));
    const badLimit = await cli(['policy', 'set', '--agent', t.agentId, '--file', path]);
    expect(badLimit.code).toBe(2);
    expect(badLimit.stderr).toMatch(/limits\[0\] has an unknown key "per"/);
    expect((await admin.client.getAgent({ agentId: t.agentId }, admin.auth)).agent!.policy!.limits).toHaveLength(3);
  });

  test('behavior: org limits set --file sets the limits every agent of the organization shares', async () => {
    const t = await tenant('org-file');
    await limitPolicy(t.agentId, []);
    const path = join(files, 'org.json');
    writeFileSync(path, JSON.stringify({ limits: [{ window: '1h', max_count: 1 }] }));
    const set = await cli(['org', 'limits', 'set', '--org', t.orgId, '--file', path]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/limits +1h: 1 payments/);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '0.01'))).status).toBe(200);
    expect((await postSign(s.url, t.apiKey, pay(t.agentId, '0.01'))).json.rule).toMatchObject({ kind: 'max_count', scope: 'organization' });
    // A file it does not understand is a usage error naming the place, and nothing is sent.
    for (const [limits, message] of [
      [[{ window: '1h', max_usd: '5', recipeint: SHOP }], /limits\[0\] has an unknown key "recipeint"/],
      [[{ window: '1h', max_usd: 5 }], /limits\[0\]\.max_usd must be a decimal string/],
      [[null], /limits\[0\] must be an object/],
      [[{ window: 60, max_count: 1 }], /limits\[0\]\.window/],
    ] as const) {
      writeFileSync(path, JSON.stringify({ limits }));
      const bad = await cli(['org', 'limits', 'set', '--org', t.orgId, '--file', path]);
      expect(bad.code, bad.stderr).toBe(2);
      expect(bad.stderr).toMatch(message);
    }
    // A count written with a fraction or an exponent is refused, as Connect JSON refuses it, in both documents.
    for (const count of ['5.0', '1e0']) {
      writeFileSync(path, `{"limits": [{"window": "1h", "max_count": ${count}}]}`);
      const bad = await cli(['org', 'limits', 'set', '--org', t.orgId, '--file', path]);
      expect(bad.code, bad.stderr).toBe(2);
      expect(bad.stderr).toContain(`limits[0].max_count must be a whole number written without a fraction or an exponent, got ${count}`);
      writeFileSync(path, `{"allow": [], "approval_threshold_usd": "1", "limits": [{"window": "1h", "max_count": ${count}}]}`);
      const badPolicy = await cli(['policy', 'set', '--agent', t.agentId, '--file', path]);
      expect(badPolicy.code, badPolicy.stderr).toBe(2);
      expect(badPolicy.stderr).toContain('limits[0].max_count must be a whole number');
    }
    expect((await admin.client.listOrganizations({}, admin.auth)).organizations.find((o) => o.id === t.orgId)!.limits.map((l) => [l.window, l.maxCount])).toEqual([['1h', 1]]);
  });

  test('behavior: a network-fee limit counts whole gwei, so a window never holds more fee than its limit', async () => {
    const t = await tenant('fee-window');
    await admin.client.setPolicy({
      agentId: t.agentId, allowlist: [SHOP], spendCapUsd: '1000', approvalThresholdUsd: '50', limits: { items: [{ window: '1h', maxNetworkFeeWei: '2000000000' }] },
    }, admin.auth);
    const raw = (gas: number, fee: string) => ({ ...pay(t.agentId, '0.01'), type: 'raw_transaction', payload: { gas, max_fee_per_gas: fee, max_priority_fee_per_gas: '1' } });
    expect((await postSign(s.url, t.apiKey, raw(21_000, '1'))).status).toBe(200);
    // 21,000 × 47,620 wei is just over a gwei: counted as two, over the 2-gwei limit with the one held.
    const over = await postSign(s.url, t.apiKey, raw(21_000, '47620'));
    expect(over.status, over.text).toBe(403);
    expect(over.json.rule).toMatchObject({ kind: 'max_network_fee_wei', limit: '2000000000', spent: '1000000000' });
    expect((await postSign(s.url, t.apiKey, raw(21_000, '1'))).status).toBe(200);
    const spend = await rest(s.url, 'GET', `/api/agents/${t.agentId}/spend`, { key: t.apiKey });
    expect(spend.json.limits[1]).toMatchObject({ max_network_fee_wei: '2000000000', network_fee_wei: '2000000000', count: 2 });
  });
});

describe('limits under concurrency', () => {
  test('property: 1,000 concurrent signs over 10 agents against an organization 24h limit of $10 at $0.10: exactly 100 succeed', async () => {
    const t = await tenant('race', [{ window: '24h', maxUsd: '10' }]);
    const agents = [t.agentId];
    for (let i = 1; i < 10; i++) agents.push(await createAgent(admin, t.orgId, `race-${i}`));
    for (const a of agents) await limitPolicy(a, []);
    // Agents repeat a 503 with the same Idempotency-Key, as they do under load.
    const results = await Promise.all(Array.from({ length: 1000 }, (_, i) => postSignRetrying([s.url], i, t.apiKey, pay(agents[i % 10]!, '0.1'), `race-${i}`)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((x) => x === 200)).toHaveLength(100);
    expect(statuses.filter((x) => x !== 200 && x !== 403), results.find((r) => r.status !== 200 && r.status !== 403)?.text).toEqual([]);
    const spend = await rest(s.url, 'GET', `/api/agents/${t.agentId}/spend`, { key: t.apiKey });
    expect(spend.json.limits.at(-1)).toMatchObject({ scope: 'organization', spent_usd: '10', count: 100 });
  }, 120_000);

  test('property: 200 concurrent signs against max_count 20 in 1h: exactly 20 succeed', async () => {
    const t = await tenant('count-race');
    await limitPolicy(t.agentId, [{ window: '1h', maxCount: 20 }]);
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => postSignRetrying([s.url], i, t.apiKey, pay(t.agentId, '0.01'), `count-${i}`)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(20);
    expect(results.filter((r) => r.status !== 200 && r.status !== 403)).toEqual([]);
  }, 60_000);
});
