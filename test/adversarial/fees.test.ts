import { Code, type Client } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { getAddress, parseTransaction, recoverTransactionAddress, type Address, type Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { ApprovalStatus, PaymentPolicyService, PaymentType, SignOutcome } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { createUser, dashboardFetch, httpSignIn, type HttpSession } from '../dashboard/helpers.js';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { runCliInProcess as runCli } from '../helpers/cliInProcess.js';
import { connectClient, grpcChannel, grpcUnary } from '../helpers/clients.js';
import { getApprovalStatus, listAllTransactions, postSign, rpcPayload, type SignBody } from '../helpers/payments.js';
import { MPP_RECIPIENT, startMppPeer, type MppPeer } from '../helpers/peers.js';
import { bearer, expectRpcError } from '../helpers/rpc.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { signedTempoTx, startTempoRpc, type TempoRpc } from '../helpers/tempoRpc.js';

/**
 * Network fees are bounded, against the real server. A raw transaction's
 * maximum fee (gas × max_fee_per_gas, wei) is checked against the agent's ceiling in the same
 * evaluation that records the verdict, over REST, Connect and gRPC, in dry runs and again when a
 * human approves. Every surface that sets the ceiling (AdminService over Connect and gRPC, the
 * CLI, the dashboard form) refuses garbage with a 400/InvalidArgument and writes nothing. MPP's
 * Tempo fee (stablecoin, not wei) has its own fixed bound of $0.05 whatever a Tempo RPC says.
 */

const RECIPIENT = '0x90f79bf6eb2c4f870365e785982e1f101e93b906';
const DEFAULT_CEILING = '1000000000000000';
const MAX_CEILING = '1000000000000000000000';
const CEILING_ERROR = /^max_network_fee_wei must be a whole number of wei from 0 to 1000000000000000000000$/;
const PASSWORD = 'correct horse battery staple';

/** The denial reason, written out here independently of src/. */
function feeReason(gas: bigint, maxFeePerGas: bigint, ceiling: string): string {
  return `Maximum network fee of ${gas * maxFeePerGas} wei (gas ${gas} × max fee ${maxFeePerGas} wei) exceeds the agent's ceiling of ${ceiling} wei`;
}

let s: TestServer;
let admin: Admin;
let connect: Client<typeof PaymentPolicyService>;
let channel: grpc.Client;
let treasury: Address;
let orgId: string;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  connect = connectClient(PaymentPolicyService, s.url);
  channel = grpcChannel(s.url);
  treasury = getAddress(s.bootstrap.treasury_address);
  orgId = s.bootstrap.org_id;
});
afterAll(async () => {
  channel?.close();
  await s?.close();
});

/** A fresh agent allowed to pay RECIPIENT: cap $100, approval above $50, the given fee ceiling (unset keeps the default). */
async function agentWith(p: { fee?: string; cap?: string; threshold?: string } = {}): Promise<string> {
  const agentId = await createAgent(admin, orgId, 'fees');
  await admin.client.setPolicy(
    { agentId, allowlist: [RECIPIENT], spendCapUsd: p.cap ?? '100', approvalThresholdUsd: p.threshold ?? '50', maxNetworkFeeWei: p.fee },
    admin.auth,
  );
  return agentId;
}

async function policyOf(agentId: string) {
  return (await admin.client.getAgent({ agentId }, admin.auth)).agent!.policy!;
}

function rawBody(agentId: string, payload: Record<string, unknown>, extra: Partial<SignBody> = {}): SignBody {
  return { agent_id: agentId, type: 'raw_transaction', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.5', payload, ...extra };
}

/** One transport's answer to a raw transaction sign request, reduced to what the three share. */
type Answer = { status: number; reason: string; serialized: string | undefined };

const STATUS_OF: Record<number, number> = { [SignOutcome.ALLOWED]: 200, [SignOutcome.PENDING_APPROVAL]: 202, [SignOutcome.DENIED]: 403 };

const TRANSPORTS: Record<'REST' | 'Connect' | 'gRPC', (agentId: string, payload: Record<string, unknown>) => Promise<Answer>> = {
  async REST(agentId, payload) {
    const r = await postSign(s.url, s.bootstrap.api_key, rawBody(agentId, payload));
    return { status: r.status, reason: r.json?.reason ?? r.json?.error ?? '', serialized: r.json?.raw_transaction?.serialized };
  },
  async Connect(agentId, payload) {
    try {
      const m = await connect.sign(
        { agentId, type: PaymentType.RAW_TRANSACTION, chainId: 8453, recipientAddress: RECIPIENT, amountUsd: '0.5', payload: rpcPayload('raw_transaction', payload) },
        bearer(s.bootstrap.api_key),
      );
      return { status: STATUS_OF[m.outcome]!, reason: m.reason, serialized: m.rawTransaction?.serialized };
    } catch (err) {
      const e = err as { code: Code; rawMessage: string };
      return { status: e.code === Code.InvalidArgument ? 400 : 500, reason: e.rawMessage, serialized: undefined };
    }
  },
  async gRPC(agentId, payload) {
    const r = await grpcUnary(
      channel, PaymentPolicyService, PaymentPolicyService.method.sign,
      { agentId, type: PaymentType.RAW_TRANSACTION, chainId: 8453, recipientAddress: RECIPIENT, amountUsd: '0.5', payload: rpcPayload('raw_transaction', payload) },
      s.bootstrap.api_key,
    );
    if (!r.ok) return { status: r.code === grpc.status.INVALID_ARGUMENT ? 400 : 500, reason: r.details, serialized: undefined };
    return { status: STATUS_OF[r.message.outcome]!, reason: r.message.reason, serialized: r.message.rawTransaction?.serialized };
  },
};

/** The signed transaction carries exactly the asked gas and fee cap, and the treasury signed it. */
async function expectSignedWith(serialized: string | undefined, gas: bigint, maxFeePerGas: bigint) {
  expect(serialized).toMatch(/^0x02/);
  const tx = parseTransaction(serialized as `0x02${string}`);
  expect([tx.gas, tx.maxFeePerGas]).toEqual([gas, maxFeePerGas]);
  expect(await recoverTransactionAddress({ serializedTransaction: serialized as `0x02${string}` })).toBe(treasury);
}

describe('raw_transaction network fee against the default ceiling (10^15 wei)', () => {
  const CASES: Array<{ name: string; payload: Record<string, unknown>; gas: bigint; fee: bigint; allowed: boolean }> = [
    { name: 'the payload defaults: 100,000 gas × 1 gwei', payload: {}, gas: 100_000n, fee: 10n ** 9n, allowed: true },
    { name: 'the smallest request: 21,000 gas × 1 wei', payload: { gas: 21_000, max_fee_per_gas: '1', max_priority_fee_per_gas: '0' }, gas: 21_000n, fee: 1n, allowed: true },
    { name: 'exactly at the ceiling: 100,000 gas × 10 gwei', payload: { gas: 100_000, max_fee_per_gas: '10000000000' }, gas: 100_000n, fee: 10n ** 10n, allowed: true },
    { name: 'just over: 100,000 gas × (10 gwei + 1 wei)', payload: { gas: 100_000, max_fee_per_gas: '10000000001' }, gas: 100_000n, fee: 10n ** 10n + 1n, allowed: false },
    { name: "the README's example: 100,000 gas × 20 gwei", payload: { gas: 100_000, max_fee_per_gas: '20000000000' }, gas: 100_000n, fee: 2n * 10n ** 10n, allowed: false },
    {
      name: 'both at their request limits: 1,000,000 gas × 1000 gwei (1 ETH)',
      payload: { gas: 1_000_000, max_fee_per_gas: '1000000000000', max_priority_fee_per_gas: '1000000000000' }, gas: 1_000_000n, fee: 10n ** 12n, allowed: false,
    },
  ];
  let agentId: string;
  beforeAll(async () => {
    agentId = await agentWith();
  });

  test('behavior: a new agent gets the default ceiling of 10^15 wei', async () => {
    const created = await admin.client.createAgent({ orgId, name: 'fresh' }, admin.auth);
    expect(created.agent!.policy!.maxNetworkFeeWei).toBe(DEFAULT_CEILING);
    expect((await policyOf(agentId)).maxNetworkFeeWei).toBe(DEFAULT_CEILING);
  });

  for (const [transport, sign] of Object.entries(TRANSPORTS)) {
    test.each(CASES)(`behavior: ${transport}: $name`, async ({ payload, gas, fee, allowed }) => {
      const a = await sign(agentId, payload);
      if (allowed) {
        expect(a.status, a.reason).toBe(200);
        await expectSignedWith(a.serialized, gas, fee);
      } else {
        expect(a).toEqual({ status: 403, reason: feeReason(gas, fee, DEFAULT_CEILING), serialized: undefined });
      }
    });
  }

  test('behavior: the refusal is recorded as a denied row that holds nothing against the cap', async () => {
    const capped = await agentWith({ cap: '1', threshold: '1' });
    const r = await postSign(s.url, s.bootstrap.api_key, rawBody(capped, { gas: 1_000_000, max_fee_per_gas: '1000000000000' }, { amount_usd: '1' }));
    expect(r.status).toBe(403);
    expect(r.json).toEqual({
      error: 'Policy denied', reason: feeReason(1_000_000n, 10n ** 12n, DEFAULT_CEILING), transaction_id: expect.any(String),
      rule: { kind: 'network_fee', window: null, scope: 'agent', recipient: null, limit: String(DEFAULT_CEILING), spent: null },
    });
    const rows = await listAllTransactions(admin, orgId, capped);
    expect(rows.map((t) => [t.id, t.status, t.reason])).toEqual([[r.json.transaction_id, 'denied', r.json.reason]]);
    // The whole $1 cap is still free for a payment within the fee ceiling.
    const ok = await postSign(s.url, s.bootstrap.api_key, rawBody(capped, {}, { amount_usd: '1' }));
    expect(ok.status, ok.text).toBe(200);
  });

  test('behavior: a payment over both the fee ceiling and the threshold is denied (403), never queued for approval', async () => {
    const a = await agentWith({ threshold: '1' });
    const r = await postSign(s.url, s.bootstrap.api_key, rawBody(a, { max_fee_per_gas: '20000000000' }, { amount_usd: '5' }));
    expect([r.status, r.json.reason]).toEqual([403, feeReason(100_000n, 2n * 10n ** 10n, DEFAULT_CEILING)]);
    expect((await admin.client.listApprovals({ orgId, status: ApprovalStatus.PENDING }, admin.auth)).approvals.filter((x) => x.agentId === a)).toEqual([]);
  });

  test('behavior: a dry run reports the fee refusal with the numbers and writes nothing (REST and Connect)', async () => {
    const a = await agentWith();
    const r = await postSign(s.url, s.bootstrap.api_key, rawBody(a, { max_fee_per_gas: '20000000000' }, { dry_run: true }));
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({ dry_run: true, status: 'denied', reason: feeReason(100_000n, 2n * 10n ** 10n, DEFAULT_CEILING) });
    const m = await connect.sign(
      { agentId: a, type: PaymentType.RAW_TRANSACTION, recipientAddress: RECIPIENT, amountUsd: '0.5', payload: rpcPayload('raw_transaction', { max_fee_per_gas: '20000000000' }), dryRun: true },
      bearer(s.bootstrap.api_key),
    );
    expect([m.outcome, m.dryRun, m.reason]).toEqual([SignOutcome.DENIED, true, feeReason(100_000n, 2n * 10n ** 10n, DEFAULT_CEILING)]);
    expect(await listAllTransactions(admin, orgId, a)).toEqual([]);
  });

  test('behavior: ceiling 0 refuses even the smallest raw transaction; authorizations carry no payer fee and still pass', async () => {
    const a = await agentWith({ fee: '0' });
    const r = await postSign(s.url, s.bootstrap.api_key, rawBody(a, { gas: 21_000, max_fee_per_gas: '1', max_priority_fee_per_gas: '0' }));
    expect([r.status, r.json.reason]).toEqual([403, feeReason(21_000n, 1n, '0')]);
    for (const type of ['eip3009', 'permit2']) {
      const ok = await postSign(s.url, s.bootstrap.api_key, { agent_id: a, type, chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.5' });
      expect(ok.status, `${type}: ${ok.text}`).toBe(200);
    }
  });

  test('behavior: the largest ceiling (10^21 wei) admits the largest fee a request can carry (1 ETH)', async () => {
    const a = await agentWith({ fee: MAX_CEILING });
    const r = await postSign(s.url, s.bootstrap.api_key, rawBody(a, { gas: 1_000_000, max_fee_per_gas: '1000000000000' }));
    expect(r.status, r.text).toBe(200);
    await expectSignedWith(r.json.raw_transaction.serialized, 1_000_000n, 10n ** 12n);
  });

  const BAD_PAYLOADS: Array<[string, Record<string, unknown>]> = [
    ['gas above 1,000,000', { gas: 1_000_001 }],
    ['a max fee above 1000 gwei', { max_fee_per_gas: '1000000000001' }],
    ['a non-numeric max fee', { max_fee_per_gas: 'lots' }],
    ['a max fee in exponent form', { max_fee_per_gas: '1e30' }],
    ['a 40-digit gas', { gas: '9'.repeat(40) }],
    ['a negative max fee', { max_fee_per_gas: -1 }],
  ];
  // RawTransactionPayload's fields are uint64, so Connect and gRPC callers cannot send text, negative
  // numbers or more than 64 bits at all; only the out-of-range values reach the server that way.
  const typed = (payload: Record<string, unknown>) => Object.values(payload).every((v) => typeof v === 'number' ? v >= 0 : /^\d{1,19}$/.test(String(v)));
  for (const [transport, sign] of Object.entries(TRANSPORTS)) {
    const cases = transport === 'REST' ? BAD_PAYLOADS : BAD_PAYLOADS.filter(([, payload]) => typed(payload));
    test.each(cases)(`error: invalid_argument: ${transport}: %s is a 400, never a signature or a 500`, async (_name, payload) => {
      const a = await sign(agentId, payload);
      expect(a.status, a.reason).toBe(400);
      expect(a.reason).toMatch(/^payload\.(gas|max_fee_per_gas) must be an integer/);
    });
  }
});

describe('SetPolicy validates max_network_fee_wei (Connect and gRPC)', () => {
  const GARBAGE: Array<[string, string]> = [
    ['empty', ''], ['blank', '   '], ['negative', '-1'], ['plus sign', '+5'], ['exponent', '1e15'], ['hex', '0x10'], ['decimal', '1.5'],
    ['grouped', '1,000'], ['inner space', '10 000'], ['words', 'lots'], ['NaN', 'NaN'], ['Infinity', 'Infinity'],
    ['non-ASCII digits', '\u0661\u0662\u0663'], ['NUL', '1\u0000'], ['10^21 + 1', '1000000000000000000001'], ['30 nines', '9'.repeat(30)],
    ['100,000 digits', '9'.repeat(100_000)],
  ];
  let agentId: string;
  beforeAll(async () => {
    agentId = await agentWith({ fee: '123456789' });
  });

  /** The policy must be exactly what it was: no field of a refused request is written. */
  async function expectUnchanged() {
    const p = await policyOf(agentId);
    expect([p.allowlist, p.spendCapUsd, p.approvalThresholdUsd, p.maxNetworkFeeWei]).toEqual([[RECIPIENT], '100', '50', '123456789']);
  }

  test.each(GARBAGE)('error: invalid_argument: Connect: %s', async (_name, value) => {
    await expectRpcError(
      admin.client.setPolicy({ agentId, allowlist: [], spendCapUsd: '7', approvalThresholdUsd: '3', maxNetworkFeeWei: value }, admin.auth),
      Code.InvalidArgument, CEILING_ERROR,
    );
    await expectUnchanged();
  });

  test.each(GARBAGE)('error: invalid_argument: gRPC: %s', async (_name, value) => {
    const r = await grpcUnary(
      channel, AdminService, AdminService.method.setPolicy,
      { agentId, allowlist: [], spendCapUsd: '7', approvalThresholdUsd: '3', maxNetworkFeeWei: value }, s.bootstrap.admin_token,
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect([grpc.status[r.code], r.details]).toEqual(['INVALID_ARGUMENT', expect.stringMatching(CEILING_ERROR)]);
    await expectUnchanged();
  });

  test('behavior: 0, 10^21 and leading zeros are accepted and stored normalized; blanks around the number are refused', async () => {
    const a = await agentWith();
    for (const given of [' 42', '42 ', '\t42']) {
      await expectRpcError(
        admin.client.setPolicy({ agentId: a, allowlist: [RECIPIENT], spendCapUsd: '1', approvalThresholdUsd: '1', maxNetworkFeeWei: given }, admin.auth),
        Code.InvalidArgument, /max_network_fee_wei must be a whole number of wei/,
      );
    }
    for (const [given, stored] of [['0', '0'], [MAX_CEILING, MAX_CEILING], ['007', '7']]) {
      const r = await admin.client.setPolicy({ agentId: a, allowlist: [RECIPIENT], spendCapUsd: '1', approvalThresholdUsd: '1', maxNetworkFeeWei: given }, admin.auth);
      expect(r.policy!.maxNetworkFeeWei).toBe(stored);
      expect((await policyOf(a)).maxNetworkFeeWei).toBe(stored);
    }
  });

  test('behavior: a SetPolicy without the field (an older client) keeps the current ceiling, over Connect and gRPC', async () => {
    const a = await agentWith({ fee: '5000' });
    await admin.client.setPolicy({ agentId: a, allowlist: [RECIPIENT], spendCapUsd: '2', approvalThresholdUsd: '2' }, admin.auth);
    expect(await policyOf(a)).toMatchObject({ spendCapUsd: '2', maxNetworkFeeWei: '5000' });
    const r = await grpcUnary(channel, AdminService, AdminService.method.setPolicy, { agentId: a, allowlist: [RECIPIENT], spendCapUsd: '3', approvalThresholdUsd: '3' }, s.bootstrap.admin_token);
    expect(r.ok && r.message.policy!.maxNetworkFeeWei).toBe('5000');
  });
});

describe('approvals show the maximum fee and re-check it', () => {
  test('error: lowering the ceiling while a raw transaction waits refuses the approval; restoring it lets the approval sign', async () => {
    const agentId = await agentWith({ threshold: '1' });
    const body = rawBody(agentId, { gas: 100_000, max_fee_per_gas: '5000000000' }, { amount_usd: '5' });
    const r = await postSign(s.url, s.bootstrap.api_key, body, 'fee-approval-1');
    expect(r.status, r.text).toBe(202);
    const approvalId = r.json.approval_request_id as string;

    const listed = (await admin.client.listApprovals({ orgId, status: ApprovalStatus.PENDING }, admin.auth)).approvals.find((a) => a.id === approvalId)!;
    expect([listed.maxNetworkFeeWei, listed.maxNetworkFeeUsd]).toEqual(['500000000000000', '']);
    const cli = await runCli(['approval', 'list', '--org', orgId, '--status', 'pending', '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout.split('\n')[0]).toMatch(/^ID\s+STATUS\s+AMOUNT\s+MAX FEE\s+AGENT/);
    expect(cli.stdout.split('\n').find((l) => l.startsWith(approvalId))).toMatch(/\$5\s+500000000000000 wei\s+agt_/);

    await admin.client.setPolicy(
      { agentId, allowlist: [RECIPIENT], spendCapUsd: '100', approvalThresholdUsd: '1', maxNetworkFeeWei: '499999999999999' }, admin.auth,
    );
    const decide = () => admin.client.decideApproval({ id: approvalId, decision: Decision.APPROVE, note: '', decidedBy: 'alice' }, admin.auth);
    const refusal = `Policy re-check refused the approval: ${feeReason(100_000n, 5n * 10n ** 9n, '499999999999999')}`;
    await expectRpcError(decide(), Code.FailedPrecondition, new RegExp(`^${refusal.replace(/[()×]/g, '\\$&')}$`));
    expect((await getApprovalStatus(s.url, s.bootstrap.api_key, approvalId)).json.status).toBe('pending');
    expect((await postSign(s.url, s.bootstrap.api_key, body, 'fee-approval-1')).status).toBe(202);

    await admin.client.setPolicy(
      { agentId, allowlist: [RECIPIENT], spendCapUsd: '100', approvalThresholdUsd: '1', maxNetworkFeeWei: '500000000000000' }, admin.auth,
    );
    expect((await decide()).approval!.status).toBe(ApprovalStatus.APPROVED);
    const collected = await postSign(s.url, s.bootstrap.api_key, body, 'fee-approval-1');
    expect(collected.status, collected.text).toBe(200);
    await expectSignedWith(collected.json.raw_transaction.serialized, 100_000n, 5n * 10n ** 9n);
  });

  test('behavior: an authorization needing approval shows no network fee (the payee or facilitator pays gas)', async () => {
    const agentId = await agentWith({ threshold: '1' });
    const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '2' });
    expect(r.status).toBe(202);
    const listed = (await admin.client.listApprovals({ orgId, status: ApprovalStatus.PENDING }, admin.auth)).approvals.find((a) => a.id === r.json.approval_request_id)!;
    expect([listed.maxNetworkFeeWei, listed.maxNetworkFeeUsd]).toEqual(['', '']);
  });
});

describe('dashboard: the policy form sets the ceiling (owners only) and the approval card shows the fee', () => {
  let owner: HttpSession;
  let approver: HttpSession;
  beforeAll(async () => {
    await createUser(admin, orgId, 'fee-owner@example.com', 'owner', PASSWORD);
    await createUser(admin, orgId, 'fee-approver@example.com', 'approver', PASSWORD);
    [owner, approver] = await Promise.all([httpSignIn(s.url, 'fee-owner@example.com', PASSWORD), httpSignIn(s.url, 'fee-approver@example.com', PASSWORD)]);
  });

  function postPolicy(session: HttpSession, agentId: string, fields: Record<string, string>) {
    return dashboardFetch(s.url, session, `/dashboard/agents/${agentId}/policy`, {
      form: { _csrf: session.csrf, allowlist: RECIPIENT, spend_cap_usd: '9', approval_threshold_usd: '4', ...fields },
    });
  }

  test('behavior: the form shows the current ceiling; a valid value is saved, an omitted field keeps it', async () => {
    const agentId = await agentWith();
    const page = await (await dashboardFetch(s.url, owner, `/dashboard/agents/${agentId}`)).text();
    // The form takes the ceiling in ETH and stores it in wei (src/dashboard/ether.ts).
    expect(page).toContain('name="max_network_fee_eth" value="0.001"');
    const saved = await postPolicy(owner, agentId, { max_network_fee_eth: '0.002' });
    expect(saved.status).toBe(303);
    expect(await policyOf(agentId)).toMatchObject({ spendCapUsd: '9', maxNetworkFeeWei: '2000000000000000' });
    expect((await postPolicy(owner, agentId, { spend_cap_usd: '8' })).status).toBe(303);
    expect(await policyOf(agentId)).toMatchObject({ spendCapUsd: '8', maxNetworkFeeWei: '2000000000000000' });
  });

  test.each(['lots', '-1', '1e15', '', '0.0000000000000000001', '1000.000000000000000001', '9'.repeat(40)])(
    'error: invalid_argument: %j is a 400 with the message on the field, and nothing is written',
    async (value) => {
      const agentId = await agentWith({ fee: '777' });
      const r = await postPolicy(owner, agentId, { max_network_fee_eth: value });
      expect(r.status).toBe(400);
      const html = await r.text();
      expect(html).toMatch(/Max network fee (must be an amount of ETH such as 0\.001|has more than 18 decimals|must be from 0 to 1000 ETH)/);
      expect(html).toMatch(/id="max-fee"[^>]*aria-invalid="true"/);
      expect(await policyOf(agentId)).toMatchObject({ spendCapUsd: '100', maxNetworkFeeWei: '777' });
    },
  );

  test('error: an approver cannot change the ceiling (403, unchanged)', async () => {
    const agentId = await agentWith({ fee: '777' });
    expect((await postPolicy(approver, agentId, { max_network_fee_eth: '1000' })).status).toBe(403);
    expect((await policyOf(agentId)).maxNetworkFeeWei).toBe('777');
  });

  test('behavior: a pending raw transaction\'s card shows its maximum fee in wei and ETH', async () => {
    const agentId = await agentWith({ threshold: '1' });
    const r = await postSign(s.url, s.bootstrap.api_key, rawBody(agentId, { gas: 50_000, max_fee_per_gas: '3000000000' }, { amount_usd: '3' }));
    expect(r.status).toBe(202);
    const page = await (await dashboardFetch(s.url, approver, '/dashboard/approvals')).text();
    const card = page.slice(page.indexOf(`data-approval-id="${r.json.approval_request_id}"`));
    expect(card.slice(0, card.indexOf('</article>'))).toMatch(/<dt>Max network fee<\/dt><dd>150,000,000,000,000 wei \(0\.00015 ETH\)/);
  });
});

describe('CLI: policy set --max-fee-wei', () => {
  const cli = (...args: string[]) => runCli([...args, '--url', s.url, '--admin-token', s.bootstrap.admin_token]);

  test('behavior: the flag sets the ceiling; without it the ceiling stays as it is', async () => {
    const agentId = await agentWith();
    const set = await cli('policy', 'set', '--agent', agentId, '--allow', RECIPIENT, '--cap', '1', '--threshold', '1', '--max-fee-wei', '5000');
    expect([set.code, set.stderr]).toEqual([0, '']);
    expect(set.stdout).toMatch(/max network fee\s+5000 wei \(0\.000000000000005 ETH\) per payment/);
    const kept = await cli('policy', 'set', '--agent', agentId, '--allow', RECIPIENT, '--cap', '2', '--threshold', '1');
    expect(kept.code, kept.stderr).toBe(0);
    expect(await policyOf(agentId)).toMatchObject({ spendCapUsd: '2', maxNetworkFeeWei: '5000' });
  });

  test.each(['lots', '-1', '1e18', '1000000000000000000001'])('error: invalid_argument: --max-fee-wei %s fails with the server\'s message and writes nothing', async (value) => {
    const agentId = await agentWith({ fee: '5000' });
    const r = await cli('policy', 'set', '--agent', agentId, '--allow', RECIPIENT, '--cap', '3', '--threshold', '1', '--max-fee-wei', value);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('paypolicy: invalid_argument: max_network_fee_wei must be a whole number of wei from 0 to 1000000000000000000000');
    expect(await policyOf(agentId)).toMatchObject({ spendCapUsd: '100', maxNetworkFeeWei: '5000' });
  });
});

describe('MPP: the Tempo fee has its own bound ($0.05) whatever the Tempo RPC says', () => {
  let peer: MppPeer;
  let rpc: TempoRpc;
  let t: TestServer;
  let tAdmin: Admin;
  beforeAll(async () => {
    peer = await startMppPeer();
    // A hostile or broken node: 2,000,000 gas and a gas price of 10^11 (the per-value limits).
    rpc = await startTempoRpc({ eth_chainId: '0xa5bf', eth_gasPrice: '0x174876e800', eth_maxPriorityFeePerGas: '0x174876e800', eth_estimateGas: '0x1e8480' });
    t = await startTestServer({ dev: true, probeAllowHosts: [peer.host], tempoRpcUrl: rpc.url, logLevel: 'warn' });
    tAdmin = adminFor(t);
  });
  afterAll(async () => {
    await t?.close();
    await Promise.all([peer?.close(), rpc?.close()]);
  });

  async function mppAgent(threshold: string): Promise<string> {
    const id = await createAgent(tAdmin, t.bootstrap.org_id, 'tempo-fees');
    await tAdmin.client.setPolicy({ agentId: id, allowlist: [MPP_RECIPIENT], spendCapUsd: '10', approvalThresholdUsd: threshold }, tAdmin.auth);
    return id;
  }

  test('behavior: gas × max fee per gas stays within 5·10^16 attodollars and the paywall accepts the payment', async () => {
    const url = peer.url('/tempo-bound');
    const r = await postSign(t.url, t.bootstrap.api_key, { agent_id: await mppAgent('1'), type: 'mpp', payload: { resource_url: url } });
    expect(r.status, r.text).toBe(200);
    const tx = signedTempoTx(r.json.payment_header.value as string);
    expect(tx.gas * tx.maxFeePerGas <= 5n * 10n ** 16n, `${tx.gas} × ${tx.maxFeePerGas}`).toBe(true);
    expect([tx.gas, tx.maxFeePerGas]).toEqual([2_000_000n, 25_000_000_000n]);
    expect(tx.maxPriorityFeePerGas <= tx.maxFeePerGas).toBe(true);
    const paid = await fetch(url, { headers: { accept: 'application/json', [r.json.payment_header.name]: r.json.payment_header.value as Hex } });
    expect(paid.status, await paid.clone().text()).toBe(200);
  });

  test('behavior: an MPP approval shows the Tempo fee bound in USD and no wei fee', async () => {
    const r = await postSign(t.url, t.bootstrap.api_key, { agent_id: await mppAgent('0'), type: 'mpp', payload: { resource_url: peer.url('/tempo-approval') } });
    expect(r.status, r.text).toBe(202);
    const listed = (await tAdmin.client.listApprovals({ orgId: t.bootstrap.org_id, status: ApprovalStatus.PENDING }, tAdmin.auth)).approvals
      .find((a) => a.id === r.json.approval_request_id)!;
    expect([listed.maxNetworkFeeWei, listed.maxNetworkFeeUsd]).toEqual(['', '0.05']);
  });
});
