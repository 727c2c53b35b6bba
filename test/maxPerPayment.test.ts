import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, Decision } from '../gen/paypolicy/v1/admin_pb.js';
import { createAgent, type Admin } from './helpers/admin.js';
import { runCliInProcess } from './helpers/cliInProcess.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import type { Hex } from 'viem';
import { listAllTransactions, postSign, recoverAuthorizationSigner, type SignBody, type WireAuthorization } from './helpers/payments.js';
import { bearer, expectRpcError } from './helpers/rpc.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * An agent's maximum per payment: a hard ceiling, above which a payment is denied (403) and never
 * queued for approval, held at approval and at collection, set and read the same on every surface.
 */

const RECIPIENT = '0x2222222222222222222222222222222222222222';

let s: TestServer;
let admin: Admin;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
});
afterAll(async () => s.close());

const pay = (agentId: string, amountUsd: string, extra: Partial<SignBody> = {}): SignBody =>
  ({ agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amountUsd, ...extra });

/** An agent allowed to pay RECIPIENT: cap $100, approval above $5, at most $25 per payment. */
async function agentWithMaximum(name: string, maxPerPaymentUsd = '25'): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, name);
  await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '100', approvalThresholdUsd: '5', maxPerPaymentUsd }, admin.auth);
  return agentId;
}

const maximumOf = async (agentId: string) => (await admin.client.getAgent({ agentId }, admin.auth)).agent!.policy!.maxPerPaymentUsd;

describe('maximum per payment', () => {
  test('behavior: above the maximum is 403 naming it, never 202; at the maximum the threshold still asks a person; below it signs', async () => {
    const agentId = await agentWithMaximum('ceiling');
    const above = await postSign(s.url, s.bootstrap.api_key, pay(agentId, '25.000001'), 'above');
    expect(above.status, above.text).toBe(403);
    expect(above.json).toMatchObject({ error: 'Policy denied', reason: "Amount $25.000001 exceeds the agent's maximum of $25 per payment" });
    const at = await postSign(s.url, s.bootstrap.api_key, pay(agentId, '25'), 'at');
    expect(at.status, at.text).toBe(202);
    const below = await postSign(s.url, s.bootstrap.api_key, pay(agentId, '2'), 'below');
    expect(below.status, below.text).toBe(200);
    expect((await recoverAuthorizationSigner(below.json.signature as Hex, below.json.authorization as WireAuthorization)).toLowerCase()).toBe(s.bootstrap.treasury_address.toLowerCase());
    // The denial is a ledger row like every policy denial; nothing of it counts against the cap.
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows.filter((r) => r.status === 'denied').map((r) => r.reason)).toEqual([above.json.reason]);
    // A dry run says the same.
    const dry = await postSign(s.url, s.bootstrap.api_key, { ...pay(agentId, '30'), dry_run: true });
    expect(dry.json).toMatchObject({ dry_run: true, status: 'denied' });
  });

  test('behavior: lowered while a payment waits, approving it is refused and it is never signed', async () => {
    const agentId = await agentWithMaximum('lowered');
    const waiting = await postSign(s.url, s.bootstrap.api_key, pay(agentId, '20'), 'waits');
    expect(waiting.status, waiting.text).toBe(202);
    await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '100', approvalThresholdUsd: '5', maxPerPaymentUsd: '10' }, admin.auth);
    await expectRpcError(
      admin.client.decideApproval({ id: waiting.json.approval_request_id, decision: Decision.APPROVE }, admin.auth),
      Code.FailedPrecondition, /exceeds the agent's maximum of \$10 per payment/,
    );
    const repeat = await postSign(s.url, s.bootstrap.api_key, pay(agentId, '20'), 'waits');
    expect(repeat.status, repeat.text).not.toBe(200);
    expect(repeat.json.signature ?? null).toBeNull();
  });

  test('behavior: SetPolicy: unset keeps the maximum, set and empty removes it; GetAgent reads it back', async () => {
    const agentId = await agentWithMaximum('keeps', '7.5');
    expect(await maximumOf(agentId)).toBe('7.5');
    await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '50', approvalThresholdUsd: '5' }, admin.auth);
    expect(await maximumOf(agentId)).toBe('7.5');
    await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '50', approvalThresholdUsd: '5', maxPerPaymentUsd: '' }, admin.auth);
    expect(await maximumOf(agentId)).toBe('');
    expect((await postSign(s.url, s.bootstrap.api_key, pay(agentId, '30'), 'no-maximum')).status).toBe(202);
  });

  test('error: invalid_argument naming max_per_payment_usd for a negative, over-precise or malformed amount, and nothing changes', async () => {
    const agentId = await agentWithMaximum('refused', '9');
    for (const value of ['-1', '1.0000001', 'ten', ' 5', '1e3', '1000000000.01']) {
      await expectRpcError(
        admin.client.setPolicy({ agentId, allowlist: [], spendCapUsd: '0', approvalThresholdUsd: '0', maxPerPaymentUsd: value }, admin.auth),
        Code.InvalidArgument, /max_per_payment_usd/,
      );
    }
    expect(await maximumOf(agentId)).toBe('9');
    const policy = (await admin.client.getAgent({ agentId }, admin.auth)).agent!.policy!;
    expect(policy.allowlist).toEqual([RECIPIENT]);
  });

  test('behavior: over gRPC the same field sets and reads it', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'grpc');
    const channel = grpcChannel(s.url);
    try {
      const set = await grpcUnary(channel, AdminService, AdminService.method.setPolicy,
        { agentId, allowlist: [RECIPIENT], spendCapUsd: '10', approvalThresholdUsd: '1', maxPerPaymentUsd: '3.25' }, s.bootstrap.admin_token);
      expect(set.ok && set.message.policy?.maxPerPaymentUsd).toBe('3.25');
      const got = await grpcUnary(channel, AdminService, AdminService.method.getAgent, { agentId }, s.bootstrap.admin_token);
      expect(got.ok && got.message.agent?.policy?.maxPerPaymentUsd).toBe('3.25');
    } finally {
      channel.close();
    }
  });

  test('behavior: the CLI sets it with --max-per-payment-usd (a flag read from SetPolicyRequest) and shows it', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'cli');
    const cli = (...args: string[]) => runCliInProcess([...args, '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
    const set = await cli('policy', 'set', '--agent', agentId, '--allow', RECIPIENT, '--cap', '10', '--threshold', '1', '--max-per-payment-usd', '4');
    expect(set.stderr).toBe('');
    expect(set.stdout).toMatch(/max per payment +\$4(\.00)?\n/);
    expect(await maximumOf(agentId)).toBe('4');
    const json = JSON.parse((await cli('agent', 'get', '--id', agentId, '--json')).stdout);
    expect(json.agent.policy.maxPerPaymentUsd).toBe('4');
    const refused = await cli('policy', 'set', '--agent', agentId, '--allow', RECIPIENT, '--cap', '10', '--threshold', '1', '--max-per-payment-usd', '-4');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^paypolicy: .*max_per_payment_usd/);
    await cli('policy', 'set', '--agent', agentId, '--allow', RECIPIENT, '--cap', '10', '--threshold', '1', '--max-per-payment-usd', '');
    expect(await maximumOf(agentId)).toBe('');
  });
});
