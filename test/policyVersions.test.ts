import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent, type Admin } from './helpers/admin.js';
import { runCliInProcess } from './helpers/cliInProcess.js';
import { listAllTransactions, postSign } from './helpers/payments.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * Policy versions: every change of an agent's policy is a new numbered version kept with who made
 * it, readable over AdminService and the CLI, and every payment records the version that decided it.
 */

const SHOP = '0x2222222222222222222222222222222222222222';
let s: TestServer;
let admin: Admin;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = adminFor(s);
});
afterAll(async () => s.close());

const setPolicy = (agentId: string, capUsd: string, limits: Array<{ window: string; maxUsd?: string }> = []) =>
  admin.client.setPolicy({ agentId, allowlist: [SHOP], spendCapUsd: capUsd, approvalThresholdUsd: '5', limits: { items: limits } }, admin.auth);

describe('policy versions', () => {
  test('behavior: a new agent is version 1; each change is one more, kept with who made it; payments record the deciding version', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'versioned');
    expect((await admin.client.getAgent({ agentId }, admin.auth)).agent!.policy!.version).toBe(1);
    const second = await setPolicy(agentId, '10');
    expect(second.policy!.version).toBe(2);
    const paid = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: SHOP, amount_usd: '1' });
    expect(paid.status, paid.text).toBe(200);
    await setPolicy(agentId, '20', [{ window: '1h', maxUsd: '2' }]);
    const denied = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: SHOP, amount_usd: '3' });
    expect(denied.status, denied.text).toBe(403);

    const { versions } = await admin.client.listPolicyVersions({ agentId }, admin.auth);
    expect(versions.map((v) => [v.version, v.actor, v.policy!.spendCapUsd, v.policy!.limits.length])).toEqual([
      [1, 'admin token', '0', 0], [2, 'admin token', '10', 0], [3, 'admin token', '20', 1],
    ]);
    expect(versions.every((v, i) => i === 0 || v.createdAt!.seconds >= versions[i - 1]!.createdAt!.seconds)).toBe(true);
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(Object.fromEntries(rows.map((r) => [r.id, r.policyVersion]))).toEqual({ [paid.json.transaction_id]: 2, [denied.json.transaction_id]: 3 });
  });

  test('behavior: policy history prints each version and what changed; --json gives the documents', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'history');
    await setPolicy(agentId, '10');
    await setPolicy(agentId, '10', [{ window: '30m', maxUsd: '1' }]);
    const cli = (args: string[]) => runCliInProcess([...args, '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
    const json = await cli(['policy', 'history', '--agent', agentId, '--json']);
    expect(json.code, json.stderr).toBe(0);
    const out = JSON.parse(json.stdout) as Array<{ version: number; actor: string; changed: string[]; policy: { limits: unknown[] } }>;
    expect(out.map((v) => [v.version, v.actor, v.changed])).toEqual([
      [1, 'admin token', ['allow', 'approval_threshold_usd', 'max_per_payment_usd', 'limits', 'max_network_fee_wei']],
      [2, 'admin token', ['allow', 'approval_threshold_usd', 'limits']],
      [3, 'admin token', ['limits']],
    ]);
    expect(out[2]!.policy.limits).toEqual([{ window: '24h', max_usd: '10' }, { window: '30m', max_usd: '1' }]);
    const text = await cli(['policy', 'history', '--agent', agentId]);
    expect(text.stdout).toMatch(/^version 3 .* admin token\n {2}limits: \[\{"window":"24h","max_usd":"10"\},\{"window":"30m","max_usd":"1"\}\]$/m);
  });

  test('behavior: versions come a page at a time (20, at most 50), oldest first; policy history reads every page', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'many-versions');
    for (let cap = 1; cap <= 55; cap++) await setPolicy(agentId, String(cap));
    const first = await admin.client.listPolicyVersions({ agentId }, admin.auth);
    expect(first.versions.map((v) => v.version)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const rest = [];
    for (let token = first.nextPageToken; token !== '';) {
      const page = await admin.client.listPolicyVersions({ agentId, pageSize: 50, pageToken: token }, admin.auth);
      rest.push(...page.versions.map((v) => v.version));
      token = page.nextPageToken;
    }
    expect(rest).toEqual(Array.from({ length: 36 }, (_, i) => i + 21));
    await expect(admin.client.listPolicyVersions({ agentId, pageSize: 51 }, admin.auth)).rejects.toThrow(/page_size must be between 1 and 50/);
    const cli = await runCliInProcess(['policy', 'history', '--agent', agentId, '--json', '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout).map((v: { version: number }) => v.version)).toEqual(Array.from({ length: 56 }, (_, i) => i + 1));
  });

  test('error: another organization\'s agent or an unknown id is not found; a failed change adds no version', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'refused-change');
    await expect(setPolicy(agentId, '-1')).rejects.toThrow(/spend_cap_usd/);
    expect((await admin.client.listPolicyVersions({ agentId }, admin.auth)).versions).toHaveLength(1);
    await expect(admin.client.listPolicyVersions({ agentId: 'agt_00000000000000000000000000000000' }, admin.auth)).rejects.toThrow(/not found/i);
  });
});
