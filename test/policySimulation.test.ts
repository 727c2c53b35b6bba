import { Code } from '@connectrpc/connect';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision, SimulatedOutcome } from '../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createAgent, createKey, createTenant, type Admin, type Tenant } from './helpers/admin.js';
import { runCliInProcess } from './helpers/cliInProcess.js';
import { postSign, type SignBody } from './helpers/payments.js';
import { expectRpcError } from './helpers/rpc.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * What-if before a policy change: an agent's past requests replayed under a proposed policy. The
 * replay must decide exactly what a fresh server, given the proposed policy and the same requests
 * at the same times, decides; and it writes nothing.
 */

const SHOP = '0x2222222222222222222222222222222222222222';
const OTHER = '0x3333333333333333333333333333333333333333';
const MIN = 60_000;

type LimitInit = { window: string; maxUsd?: string; maxCount?: number; recipient?: string };
const ORG_LIMITS: LimitInit[] = [{ window: '2h', maxUsd: '32' }];
const PROPOSED = {
  allowlist: [SHOP, OTHER], spendCapUsd: '40', approvalThresholdUsd: '3', maxPerPaymentUsd: '5.5',
  limits: { items: [{ window: '1h', maxUsd: '20' }, { window: '30m', maxCount: 4 }, { window: '24h', maxUsd: '6', recipient: OTHER }] as LimitInit[] },
};
/** The agent's requests: minutes after the start, USD, recipient. Another agent pays $20 to SHOP at minute 1. */
const REQUESTS: Array<[number, string, string]> = [];
for (let i = 0; i < 36; i++) REQUESTS.push([5 + i * 6, ['1', '2.5', '0.5', '4', '6', '1.2', '10', '3'][i % 8]!, i % 3 === 0 ? OTHER : SHOP]);

const pay = (agentId: string, amountUsd: string, recipient: string): SignBody =>
  ({ agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: recipient, amount_usd: amountUsd });
const outcomeOf = (status: number) => (status === 200 ? 'allowed' : status === 202 ? 'pending_approval' : status === 403 ? 'denied' : `HTTP ${status}`);
const NAMES: Record<SimulatedOutcome, string> = {
  [SimulatedOutcome.UNSPECIFIED]: '?', [SimulatedOutcome.ALLOWED]: 'allowed', [SimulatedOutcome.PENDING_APPROVAL]: 'pending_approval', [SimulatedOutcome.DENIED]: 'denied',
};

type World = { s: TestServer; admin: Admin; t: Tenant; other: { agentId: string; apiKey: string }; clock: { now: number } };

/** A server whose organization has the org limits, a 20-minute approval window, and a second agent. */
async function world(start: number): Promise<World> {
  const clock = { now: start };
  const s = await startTestServer({ logLevel: 'warn', now: () => clock.now });
  const admin = adminFor(s);
  const t = await createTenant(admin, 'sim');
  await admin.client.provisionTreasury({ orgId: t.orgId }, admin.auth);
  await admin.client.updateOrganization({ orgId: t.orgId, approvalWindowSeconds: 1200, limits: { items: ORG_LIMITS } }, admin.auth);
  const otherId = await createAgent(admin, t.orgId, 'sim-other');
  await admin.client.setPolicy({ agentId: otherId, allowlist: [SHOP], spendCapUsd: '100', approvalThresholdUsd: '50' }, admin.auth);
  return { s, admin, t, other: { agentId: otherId, apiKey: (await createKey(admin, t.orgId, 'test')).plaintext }, clock };
}

/** Plays the scenario: the other agent's payment, then the agent's requests, each at its minute; returns each request's outcome. */
async function play(w: World, start: number): Promise<string[]> {
  w.clock.now = start + MIN;
  expect((await postSign(w.s.url, w.other.apiKey, pay(w.other.agentId, '20', SHOP))).status).toBe(200);
  const out: string[] = [];
  for (const [minute, usd, to] of REQUESTS) {
    w.clock.now = start + minute * MIN;
    const r = await postSign(w.s.url, w.t.apiKey, pay(w.t.agentId, usd, to));
    out.push(outcomeOf(r.status));
  }
  return out;
}

let history: World;
let start: number;
let had: string[];
let files: string;
beforeAll(async () => {
  files = mkdtempSync(join(tmpdir(), 'paypolicy-simulate-'));
  start = Date.now();
  history = await world(start);
  // What happened: a permissive policy allowed every request.
  await history.admin.client.setPolicy({ agentId: history.t.agentId, allowlist: [SHOP, OTHER], spendCapUsd: '1000', approvalThresholdUsd: '50' }, history.admin.auth);
  had = await play(history, start);
  history.clock.now = start + 4 * 3600 * 1000;
});
afterAll(async () => {
  rmSync(files, { recursive: true, force: true });
  await history?.s.close();
});

describe('policy simulation', () => {
  test('behavior: the replay decides every request as a fresh server with the proposed policy decides the same requests at the same times', async () => {
    // What happened: the organization's limit denied some of them already.
    expect(new Set(had)).toEqual(new Set(['allowed', 'denied']));
    const sim = await history.admin.client.simulatePolicy({ policy: { agentId: history.t.agentId, ...PROPOSED }, days: 1 }, history.admin.auth);
    expect(sim.requests).toBe(REQUESTS.length);
    expect(sim.changedTotal).toBe(sim.changed.length);

    const fresh = await world(start);
    try {
      await fresh.admin.client.setPolicy({ agentId: fresh.t.agentId, ...PROPOSED }, fresh.admin.auth);
      const decided = await play(fresh, start);
      // The simulation's answer per request: its listed change, or what it had.
      const txs = (await history.admin.client.listTransactions({ orgId: history.t.orgId, agentId: history.t.agentId, pageSize: 100 }, history.admin.auth)).transactions;
      const ids = txs.map((x) => x.id).reverse();
      expect(ids).toHaveLength(REQUESTS.length);
      const changed = new Map(sim.changed.map((c) => [c.transactionId, c]));
      const simulated = ids.map((id, i) => (changed.has(id) ? NAMES[changed.get(id)!.wouldBe] : had[i]));
      for (const [i, id] of ids.entries()) if (changed.has(id)) expect(NAMES[changed.get(id)!.was]).toBe(had[i]);
      expect(simulated).toEqual(decided);
      expect({ allowed: sim.allowed, pending: sim.pendingApproval, denied: sim.denied }).toEqual({
        allowed: decided.filter((d) => d === 'allowed').length, pending: decided.filter((d) => d === 'pending_approval').length, denied: decided.filter((d) => d === 'denied').length,
      });
      // Not a vacuous comparison: the proposed policy queues some requests, and denies some by its maximum, its count limit and the organization's limit.
      expect(sim.pendingApproval).toBeGreaterThan(0);
      const kinds = new Set(sim.changed.filter((c) => c.wouldBe === SimulatedOutcome.DENIED).map((c) => `${c.rule?.kind}/${c.rule?.scope}`));
      for (const k of ['max_per_payment/agent', 'max_count/agent', 'max_usd/organization']) expect(kinds, [...kinds].join(', ')).toContain(k);
      for (const c of sim.changed) expect(c.reason === '').toBe(c.wouldBe === SimulatedOutcome.ALLOWED);
    } finally {
      await fresh.s.close();
    }
  });

  test('behavior: a simulation writes nothing: no row, no policy version, the policy as it was', async () => {
    const before = await history.admin.client.listTransactions({ orgId: history.t.orgId, pageSize: 200 }, history.admin.auth);
    const versions = await history.admin.client.listPolicyVersions({ agentId: history.t.agentId }, history.admin.auth);
    await history.admin.client.simulatePolicy({ policy: { agentId: history.t.agentId, allowlist: [], spendCapUsd: '0', approvalThresholdUsd: '0' } }, history.admin.auth);
    expect((await history.admin.client.listTransactions({ orgId: history.t.orgId, pageSize: 200 }, history.admin.auth)).transactions).toEqual(before.transactions);
    expect(await history.admin.client.listPolicyVersions({ agentId: history.t.agentId }, history.admin.auth)).toEqual(versions);
  });

  test('behavior: policy simulate --file --json prints the counts and each change with its transaction id, both outcomes and the rule', async () => {
    const doc = { allow: [SHOP], approval_threshold_usd: '50', limits: [{ window: '24h', max_usd: '1000' }] };
    const file = join(files, 'shop-only.json');
    writeFileSync(file, JSON.stringify(doc));
    const cli = await runCliInProcess(['policy', 'simulate', '--agent', history.t.agentId, '--file', file, '--days', '2', '--json',
      '--url', history.s.url, '--admin-token', history.s.bootstrap.admin_token]);
    expect(cli.code, cli.stderr).toBe(0);
    const out = JSON.parse(cli.stdout);
    expect(out).toMatchObject({ requests: REQUESTS.length, pending_approval: 0, since: new Date(history.clock.now - 2 * 24 * 3600 * 1000).toISOString(), until: new Date(history.clock.now).toISOString() });
    expect(out.allowed + out.denied).toBe(REQUESTS.length);
    expect(out.changed_total).toBe(out.changed.length);
    // Every request to OTHER that was allowed would now be denied by the allowlist.
    const otherAllowed = REQUESTS.filter(([, , to], i) => to === OTHER && had[i] === 'allowed').length;
    expect(out.changed.filter((c: { rule: { kind: string } | null }) => c.rule?.kind === 'allowlist')).toHaveLength(otherAllowed);
    expect(out.changed[0]).toEqual({
      transaction_id: expect.any(String), created_at: new Date(start + REQUESTS[0]![0] * MIN).toISOString(), amount_usd: REQUESTS[0]![1], recipient: OTHER,
      service: null, was: 'allowed', would_be: 'denied', rule: { kind: 'allowlist', scope: 'agent', recipient: OTHER },
      reason: `Recipient ${OTHER} is not on the agent's allowlist`,
    });
  });

  test('error: days outside 1 to 366, a bad proposed policy, another organization\'s agent or none at all are refused, naming what is wrong', async () => {
    const c = history.admin.client;
    const agentId = history.t.agentId;
    await expectRpcError(c.simulatePolicy({ policy: { agentId, ...PROPOSED }, days: 0 }, history.admin.auth), Code.InvalidArgument, /days must be a whole number of days from 1 to 366/);
    await expectRpcError(c.simulatePolicy({ policy: { agentId, ...PROPOSED }, days: 367 }, history.admin.auth), Code.InvalidArgument, /days must be/);
    await expectRpcError(c.simulatePolicy({ policy: { agentId, ...PROPOSED, limits: { items: [{ window: '2w', maxUsd: '1' }] } } }, history.admin.auth), Code.InvalidArgument, /limits\[0\]\.window/);
    await expectRpcError(c.simulatePolicy({ policy: { agentId, ...PROPOSED, spendCapUsd: '-1' } }, history.admin.auth), Code.InvalidArgument, /spend_cap_usd/);
    await expectRpcError(c.simulatePolicy({ policy: { agentId: 'agt_000000000000000000000000', ...PROPOSED } }, history.admin.auth), Code.NotFound, /agent/i);
    await expectRpcError(c.simulatePolicy({}, history.admin.auth), Code.InvalidArgument, /policy is required/);
    const cli = await runCliInProcess(['policy', 'simulate', '--agent', agentId, '--cap', '5', '--threshold', '1', '--allow', SHOP, '--days', '400',
      '--url', history.s.url, '--admin-token', history.s.bootstrap.admin_token]);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toMatch(/--days must be an integer from 1 to 366/);
  });
});

describe('policy simulation: what the ledger moved', () => {
  let w: TestServer;
  let a: Admin;
  const clock = { now: Date.now() };
  beforeAll(async () => {
    w = await startTestServer({ logLevel: 'warn', now: () => clock.now });
    a = adminFor(w);
  });
  afterAll(async () => w?.close());

  test('behavior: another agent\'s payment that was approved and collected counts from its request while it waited, as the server counted it', async () => {
    const t = await createTenant(a, 'moved');
    await a.client.provisionTreasury({ orgId: t.orgId }, a.auth);
    await a.client.updateOrganization({ orgId: t.orgId, limits: { items: [{ window: '1h', maxUsd: '2' }] } }, a.auth);
    const other = await createAgent(a, t.orgId, 'moved-other');
    await a.client.setPolicy({ agentId: other, allowlist: [SHOP], spendCapUsd: '100', approvalThresholdUsd: '0.5' }, a.auth);
    await a.client.setPolicy({ agentId: t.agentId, allowlist: [SHOP], spendCapUsd: '100', approvalThresholdUsd: '1000' }, a.auth);
    const waiting = await postSign(w.url, t.apiKey, pay(other, '1.5', SHOP), 'moved-other-1');
    expect(waiting.status).toBe(202);
    clock.now += MIN;
    expect((await postSign(w.url, t.apiKey, pay(t.agentId, '1', SHOP))).status).toBe(403);
    clock.now += MIN;
    await a.client.decideApproval({ id: waiting.json.approval_request_id as string, decision: Decision.APPROVE }, a.auth);
    clock.now += MIN;
    expect((await postSign(w.url, t.apiKey, pay(other, '1.5', SHOP), 'moved-other-1')).status).toBe(200);
    const sim = await a.client.simulatePolicy({ policy: { agentId: t.agentId, allowlist: [SHOP], spendCapUsd: '100', approvalThresholdUsd: '1000' } }, a.auth);
    expect({ requests: sim.requests, denied: sim.denied, changed: sim.changedTotal }).toEqual({ requests: 1, denied: 1, changed: 0 });
  });

  test('behavior: a request that waited for approval is replayed with the approval window it had, not today\'s', async () => {
    const t = await createTenant(a, 'window');
    await a.client.provisionTreasury({ orgId: t.orgId }, a.auth);
    await a.client.updateOrganization({ orgId: t.orgId, approvalWindowSeconds: 60 }, a.auth);
    const policy = { agentId: t.agentId, allowlist: [SHOP], spendCapUsd: '2', approvalThresholdUsd: '0.5' };
    await a.client.setPolicy(policy, a.auth);
    expect((await postSign(w.url, t.apiKey, pay(t.agentId, '1', SHOP))).status).toBe(202);
    clock.now += 62_000;
    // The first approval has expired: its dollar no longer counts against the $2 cap.
    expect((await postSign(w.url, t.apiKey, pay(t.agentId, '1.5', SHOP))).status).toBe(202);
    expect((await a.client.simulatePolicy({ policy }, a.auth)).changedTotal).toBe(0);
    await a.client.updateOrganization({ orgId: t.orgId, approvalWindowSeconds: 7 * 24 * 3600 }, a.auth);
    expect((await a.client.simulatePolicy({ policy }, a.auth)).changedTotal).toBe(0);
  });
});
