import {
  decodeFunctionData,
  erc20Abi,
  getAddress,
  keccak256,
  parseTransaction,
  recoverTransactionAddress,
  recoverTypedDataAddress,
  type Address,
  type Hex,
} from 'viem';
import { AgentStatus } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createAgent, createKey, createTenant, type Admin, type Tenant } from './helpers/admin.js';
import { listAllTransactions, recoverPermit2Signer, TRANSFER_WITH_AUTHORIZATION_TYPES } from './helpers/payments.js';
import { rest, startTestServer, type RestResult, type TestServer } from './helpers/server.js';

/**
 * Golden JSON for every outcome and error of POST /api/sign and GET /api/approvals/{id}/status.
 * Whole bodies are compared with toEqual; server-chosen values (UUIDs, nonces, signatures) are
 * matched by pattern and then checked cryptographically: every signature must recover to the
 * organization's treasury address as AdminService reports it.
 *
 * The server runs on a settable clock so validity windows and approval expiry are exact.
 */

const T0 = Date.parse('2030-01-02T03:04:05.678Z');
let clock = T0;
const nowSeconds = () => Math.floor(clock / 1000);

let s: TestServer;
let admin: Admin;
let treasury: Address;
let bare: Tenant;
let liveKey: string;

const RECIPIENT = getAddress('0x70997970c51812dc3a010c7d01b50e0d17dc79c8');
const STRANGER = getAddress('0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc');
const USDC_BASE = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const USDC_SEPOLIA = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const PERMIT2 = '0x000000000022D473030F116dDEE9F6B43aC78BA3';
const PERMIT2_PROXY = '0x402085c248EeA27D92E8b30b2C58ed07f9E20001';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const uuid = () => expect.stringMatching(UUID_RE);
const hexBytes = (n: number) => expect.stringMatching(new RegExp(`^0x[0-9a-f]{${n * 2}}$`));
const decimal = () => expect.stringMatching(/^(0|[1-9]\d*)$/);
const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Recovers the signer of a REST eip3009 200 body from its own authorization fields. */
async function eip3009Signer(body: any): Promise<Address> {
  const a = body.authorization;
  return recoverTypedDataAddress({
    domain: { name: a.domain_name, version: a.domain_version, chainId: a.chain_id, verifyingContract: a.token },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: 'TransferWithAuthorization',
    message: {
      from: a.from, to: a.to, value: BigInt(a.value), validAfter: BigInt(a.valid_after), validBefore: BigInt(a.valid_before), nonce: a.nonce,
    },
    signature: body.signature as Hex,
  });
}

/** Recovers the signer of a REST permit2 200 body from its own permit2 fields. */
function permit2Signer(body: any): Promise<Address> {
  return recoverPermit2Signer(body.signature as Hex, body.permit2);
}

type Policy = { allowlist?: string[]; cap?: string; threshold?: string };
let agentCount = 0;

/** A new agent in the bootstrap organization (or `orgId`) with the given policy. */
async function agentWith(policy: Policy = {}, orgId?: string): Promise<string> {
  const agentId = await createAgent(admin, orgId ?? s.bootstrap.org_id, `golden-${++agentCount}`);
  await admin.client.setPolicy(
    { agentId, allowlist: policy.allowlist ?? [RECIPIENT], spendCapUsd: policy.cap ?? '10', approvalThresholdUsd: policy.threshold ?? '1' },
    admin.auth,
  );
  return agentId;
}

/** POST /api/sign with the bootstrap test key unless another key is given. */
function sign(body: unknown, opts: { key?: string; idem?: string } = {}): Promise<RestResult> {
  return rest(s.url, 'POST', '/api/sign', {
    key: opts.key ?? s.bootstrap.api_key,
    body,
    headers: opts.idem === undefined ? {} : { 'idempotency-key': opts.idem },
  });
}

function approvalStatus(id: string, key = s.bootstrap.api_key): Promise<RestResult> {
  return rest(s.url, 'GET', `/api/approvals/${id}/status`, { key });
}

async function ledger(agentId: string) {
  return listAllTransactions(admin, s.bootstrap.org_id, agentId);
}

async function approvalsOf(agentId: string) {
  return (await admin.client.listApprovals({ orgId: s.bootstrap.org_id }, admin.auth)).approvals.filter((a) => a.agentId === agentId);
}

const direct = (agentId: string, amount: number, type = 'eip3009', extra: Record<string, unknown> = {}) => ({
  agent_id: agentId, type, recipient_address: RECIPIENT, amount_usd: amount, ...extra,
});

beforeAll(async () => {
  s = await startTestServer({ now: () => clock });
  admin = adminFor(s);
  const orgs = await admin.client.listOrganizations({}, admin.auth);
  const org = orgs.organizations.find((o) => o.id === s.bootstrap.org_id);
  treasury = getAddress(org!.treasuryAddress);
  // A second organization created without ProvisionTreasury, with a test key and one agent.
  bare = await createTenant(admin, 'bare-org');
  await admin.client.setPolicy({ agentId: bare.agentId, allowlist: [RECIPIENT], spendCapUsd: '10', approvalThresholdUsd: '1' }, admin.auth);
  liveKey = (await createKey(admin, s.bootstrap.org_id, 'live', 'live-golden')).plaintext;
});
afterAll(async () => s.close());

describe('POST /api/sign', () => {
  test('behavior: the treasury AdminService reports is the one in the bootstrap file', () => {
    expect(treasury).toBe(getAddress(s.bootstrap.treasury_address));
  });

  describe('200 eip3009', () => {
    test('behavior: answers the signing result with a signed EIP-3009 authorization from the treasury', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.1));
      expect(r.status).toBe(200);
      expect(r.json).toEqual({
        signature: hexBytes(65),
        tx_hash: null,
        agent_id: agentId,
        cost_usd: '0.1',
        transaction_id: uuid(),
        idempotent: false,
        type: 'eip3009',
        chain_id: 8453,
        recipient_address: RECIPIENT,
        authorization: {
          from: treasury,
          to: RECIPIENT,
          value: '100000',
          valid_after: '0',
          valid_before: String(nowSeconds() + 3600),
          nonce: hexBytes(32),
          token: USDC_BASE,
          domain_name: 'USD Coin',
          domain_version: '2',
          chain_id: 8453,
        },
      });
      expect(await eip3009Signer(r.json)).toBe(treasury);
    });

    test('behavior: wire fields come first, in the order of the wire protocol', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.2));
      expect(Object.keys(r.json)).toEqual([
        'signature', 'tx_hash', 'agent_id', 'cost_usd', 'transaction_id', 'idempotent', 'type', 'chain_id', 'recipient_address', 'authorization',
      ]);
      expect(r.headers.get('content-type')).toMatch(/^application\/json\b/);
      expect(r.headers.get('cache-control')).toBe('no-store');
    });

    test('behavior: a signature changes with every payment (fresh random nonce)', async () => {
      const agentId = await agentWith();
      const a = await sign(direct(agentId, 0.3));
      const b = await sign(direct(agentId, 0.3));
      expect(a.status).toBe(200);
      expect(b.status).toBe(200);
      expect(a.json.authorization.nonce).not.toBe(b.json.authorization.nonce);
      expect(a.json.signature).not.toBe(b.json.signature);
      expect(a.json.transaction_id).not.toBe(b.json.transaction_id);
    });

    test('behavior: on Base Sepolia with a test key the authorization uses that chain\'s USDC domain', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.25, 'eip3009', { chain_id: 84532 }));
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ chain_id: 84532, cost_usd: '0.25' });
      expect(r.json.authorization).toEqual({
        from: treasury, to: RECIPIENT, value: '250000', valid_after: '0', valid_before: String(nowSeconds() + 3600), nonce: hexBytes(32),
        token: USDC_SEPOLIA, domain_name: 'USDC', domain_version: '2', chain_id: 84532,
      });
      expect(await eip3009Signer(r.json)).toBe(treasury);
    });

    test('behavior: payload.valid_for_seconds sets valid_before', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.5, 'eip3009', { payload: { valid_for_seconds: 90 } }));
      expect(r.status).toBe(200);
      expect(r.json.authorization.valid_before).toBe(String(nowSeconds() + 90));
      expect(await eip3009Signer(r.json)).toBe(treasury);
    });

    test.each([
      [0.1, '0.1', '100000'],
      [1.005, '1.005', '1005000'],
      [10, '10', '10000000'],
      [0.000001, '0.000001', '1'],
      [0.3, '0.3', '300000'],
      [2.675, '2.675', '2675000'],
      [99.999999, '99.999999', '99999999'],
    ])('behavior: JSON number %d is exact: cost_usd %s, authorization.value %s', async (amount, cost, atomic) => {
      const agentId = await agentWith({ cap: '1000', threshold: '100' });
      const r = await sign(direct(agentId, amount));
      expect(r.status).toBe(200);
      expect(r.json.cost_usd).toBe(cost);
      expect(r.json.authorization.value).toBe(atomic);
      expect(await eip3009Signer(r.json)).toBe(treasury);
      const [row] = await ledger(agentId);
      expect(row).toMatchObject({ amountUsd: cost, status: 'signed' });
    });

    test('behavior: a lowercase recipient matches a checksummed allowlist entry and comes back checksummed', async () => {
      const agentId = await agentWith({ allowlist: [RECIPIENT] });
      const r = await sign({ ...direct(agentId, 0.5), recipient_address: RECIPIENT.toLowerCase() });
      expect(r.status).toBe(200);
      expect(r.json.recipient_address).toBe(RECIPIENT);
      expect(r.json.authorization.to).toBe(RECIPIENT);
    });

    test('behavior: an upper-case recipient matches a lowercase allowlist entry', async () => {
      const agentId = await agentWith({ allowlist: [RECIPIENT.toLowerCase()] });
      const r = await sign({ ...direct(agentId, 0.5), recipient_address: `0x${RECIPIENT.slice(2).toUpperCase()}` });
      expect(r.status).toBe(200);
      expect(r.json.recipient_address).toBe(RECIPIENT);
    });

    test('behavior: a live key signs on Base mainnet and the payment is in the ledger as signed', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.75), { key: liveKey });
      expect(r.status).toBe(200);
      expect(await eip3009Signer(r.json)).toBe(treasury);
      const rows = await ledger(agentId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        id: r.json.transaction_id, agentId, type: 'eip3009', status: 'signed', amountUsd: '0.75', recipientAddress: RECIPIENT.toLowerCase(), chainId: 8453,
      });
    });
  });

  describe('200 permit2', () => {
    test('behavior: answers the signing result with a Permit2 witness transfer signed by the treasury', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.42, 'permit2'));
      expect(r.status).toBe(200);
      expect(r.json).toEqual({
        signature: hexBytes(65),
        tx_hash: null,
        agent_id: agentId,
        cost_usd: '0.42',
        transaction_id: uuid(),
        idempotent: false,
        type: 'permit2',
        chain_id: 8453,
        recipient_address: RECIPIENT,
        permit2: {
          owner: treasury,
          token: USDC_BASE,
          amount: '420000',
          spender: PERMIT2_PROXY,
          nonce: decimal(),
          deadline: String(nowSeconds() + 3600),
          to: RECIPIENT,
          valid_after: '0',
          permit2_address: PERMIT2,
          chain_id: 8453,
        },
      });
      expect(await permit2Signer(r.json)).toBe(treasury);
    });

    test('behavior: on Base Sepolia the permit names that chain and its USDC', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 1, 'permit2', { chain_id: 84532, payload: { valid_for_seconds: 600 } }));
      expect(r.status).toBe(200);
      expect(r.json.permit2).toMatchObject({ token: USDC_SEPOLIA, amount: '1000000', chain_id: 84532, deadline: String(nowSeconds() + 600) });
      expect(await permit2Signer(r.json)).toBe(treasury);
    });

    test('behavior: a tampered amount no longer recovers to the treasury', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.5, 'permit2'));
      const tampered = { ...r.json, permit2: { ...r.json.permit2, amount: '500001' } };
      expect(await permit2Signer(tampered)).not.toBe(treasury);
    });
  });

  describe('200 raw_transaction', () => {
    test('behavior: answers a signed EIP-1559 ERC-20 transfer from the treasury; signature is null', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 1, 'raw_transaction'));
      expect(r.status).toBe(200);
      expect(r.json).toEqual({
        signature: null,
        tx_hash: null,
        agent_id: agentId,
        cost_usd: '1',
        transaction_id: uuid(),
        idempotent: false,
        type: 'raw_transaction',
        chain_id: 8453,
        recipient_address: RECIPIENT,
        raw_transaction: {
          serialized: expect.stringMatching(/^0x02[0-9a-f]+$/),
          hash: hexBytes(32),
          nonce: decimal(),
          token: USDC_BASE,
          chain_id: 8453,
        },
      });
      const raw = r.json.raw_transaction;
      const serialized = raw.serialized as Hex;
      expect(keccak256(serialized)).toBe(raw.hash);
      expect(await recoverTransactionAddress({ serializedTransaction: serialized as `0x02${string}` })).toBe(treasury);
      const tx = parseTransaction(serialized);
      expect(tx).toMatchObject({
        type: 'eip1559', chainId: 8453, nonce: Number(raw.nonce), gas: 100_000n, maxFeePerGas: 1_000_000_000n, maxPriorityFeePerGas: 1_000_000n,
      });
      expect(getAddress(tx.to!)).toBe(USDC_BASE);
      expect(tx.value ?? 0n).toBe(0n);
      const call = decodeFunctionData({ abi: erc20Abi, data: tx.data! });
      expect(call.functionName).toBe('transfer');
      expect(call.args).toEqual([RECIPIENT, 1_000_000n]);
    });

    test('behavior: type defaults to raw_transaction and chain_id to 8453', async () => {
      const agentId = await agentWith();
      const r = await sign({ agent_id: agentId, recipient_address: RECIPIENT, amount_usd: 0.05 });
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ type: 'raw_transaction', chain_id: 8453, signature: null, cost_usd: '0.05' });
      const tx = parseTransaction(r.json.raw_transaction.serialized as Hex);
      expect(tx.chainId).toBe(8453);
      expect(decodeFunctionData({ abi: erc20Abi, data: tx.data! }).args).toEqual([RECIPIENT, 50_000n]);
    });

    test('behavior: payload gas and fees are used as given', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.5, 'raw_transaction', { payload: { gas: 65_000, max_fee_per_gas: '2000000000', max_priority_fee_per_gas: 7 } }));
      expect(r.status).toBe(200);
      const tx = parseTransaction(r.json.raw_transaction.serialized as Hex);
      expect(tx).toMatchObject({ gas: 65_000n, maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 7n });
      expect(await recoverTransactionAddress({ serializedTransaction: r.json.raw_transaction.serialized })).toBe(treasury);
    });

    test('behavior: consecutive raw transactions on a chain use consecutive treasury nonces', async () => {
      const agentId = await agentWith();
      const a = await sign(direct(agentId, 0.1, 'raw_transaction'));
      const b = await sign(direct(agentId, 0.1, 'raw_transaction'));
      expect(Number(b.json.raw_transaction.nonce)).toBe(Number(a.json.raw_transaction.nonce) + 1);
      expect(parseTransaction(b.json.raw_transaction.serialized as Hex).nonce).toBe(Number(b.json.raw_transaction.nonce));
    });

    test('behavior: pending, denied and dry-run raw transactions do not consume treasury nonces', async () => {
      const agentId = await agentWith();
      const a = await sign(direct(agentId, 0.1, 'raw_transaction'));
      expect((await sign(direct(agentId, 5, 'raw_transaction'))).status).toBe(202);
      expect((await sign({ ...direct(agentId, 0.1, 'raw_transaction'), recipient_address: STRANGER })).status).toBe(403);
      expect((await sign(direct(agentId, 0.1, 'raw_transaction', { dry_run: true }))).status).toBe(200);
      const b = await sign(direct(agentId, 0.1, 'raw_transaction'));
      expect(Number(b.json.raw_transaction.nonce)).toBe(Number(a.json.raw_transaction.nonce) + 1);
    });

    test('behavior: concurrent raw transactions never share a nonce', async () => {
      const agentId = await agentWith({ cap: '100', threshold: '100' });
      const all = await Promise.all(Array.from({ length: 6 }, () => sign(direct(agentId, 0.1, 'raw_transaction'))));
      expect(all.map((r) => r.status)).toEqual(Array(6).fill(200));
      const nonces = all.map((r) => Number(r.json.raw_transaction.nonce)).sort((x, y) => x - y);
      expect(new Set(nonces).size).toBe(6);
      expect(nonces[5]! - nonces[0]!).toBe(5);
    });

    test('behavior: a Base Sepolia transaction targets that chain\'s USDC', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.2, 'raw_transaction', { chain_id: 84532 }));
      expect(r.status).toBe(200);
      expect(r.json.raw_transaction).toMatchObject({ token: USDC_SEPOLIA, chain_id: 84532 });
      const tx = parseTransaction(r.json.raw_transaction.serialized as Hex);
      expect(tx.chainId).toBe(84532);
      expect(getAddress(tx.to!)).toBe(USDC_SEPOLIA);
      expect(await recoverTransactionAddress({ serializedTransaction: r.json.raw_transaction.serialized })).toBe(treasury);
    });
  });

  describe('202 pending approval', () => {
    test('behavior: an amount above the threshold answers exactly status, reason, transaction_id, approval_request_id', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 1.5));
      expect(r.status).toBe(202);
      expect(r.json).toEqual({
        status: 'pending_approval',
        reason: 'Amount $1.5 exceeds the approval threshold of 1 USD; a human must approve it',
        transaction_id: uuid(),
        approval_request_id: uuid(),
        rule: { kind: 'approval_threshold', window: null, scope: 'agent', recipient: null, limit: '1', spent: null },
      });
      expect(Object.keys(r.json)).toEqual(['status', 'reason', 'transaction_id', 'approval_request_id', 'rule']);
      const rows = await ledger(agentId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ id: r.json.transaction_id, status: 'pending_approval', approvalRequestId: r.json.approval_request_id, amountUsd: '1.5' });
    });

    test('behavior: an amount equal to the threshold is signed, one micro-dollar above is pending', async () => {
      const agentId = await agentWith();
      expect((await sign(direct(agentId, 1))).status).toBe(200);
      const above = await sign(direct(agentId, 1.000001));
      expect(above.status).toBe(202);
      expect(above.json.reason).toBe('Amount $1.000001 exceeds the approval threshold of 1 USD; a human must approve it');
    });
  });

  describe('403 policy denied', () => {
    async function expectDenied(r: RestResult, reason: string) {
      expect(r.status).toBe(403);
      expect(r.json).toEqual({ error: 'Policy denied', reason, transaction_id: uuid(), rule: expect.objectContaining({ kind: expect.any(String) }) });
      expect(Object.keys(r.json)).toEqual(['error', 'reason', 'transaction_id', 'rule']);
      expect(Object.keys(r.json.rule as object)).toEqual(['kind', 'window', 'scope', 'recipient', 'limit', 'spent']);
    }

    test('behavior: a paused agent is denied and the denial is recorded', async () => {
      const agentId = await agentWith();
      await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
      const r = await sign(direct(agentId, 0.5));
      await expectDenied(r, 'Agent is paused; it cannot make payments');
      const rows = await ledger(agentId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ id: r.json.transaction_id, status: 'denied', reason: 'Agent is paused; it cannot make payments' });
    });

    test('behavior: a revoked agent is denied', async () => {
      const agentId = await agentWith();
      await admin.client.updateAgent({ agentId, status: AgentStatus.REVOKED }, admin.auth);
      await expectDenied(await sign(direct(agentId, 0.5)), 'Agent is revoked; it cannot make payments');
    });

    test('behavior: a recipient not on the allowlist is denied', async () => {
      const agentId = await agentWith();
      await expectDenied(await sign({ ...direct(agentId, 0.5), recipient_address: STRANGER }), `Recipient ${STRANGER.toLowerCase()} is not on the agent's allowlist`);
    });

    test('behavior: an empty allowlist denies everything, even a tiny amount', async () => {
      const agentId = await agentWith({ allowlist: [] });
      await expectDenied(
        await sign(direct(agentId, 0.000001)),
        `Recipient ${RECIPIENT.toLowerCase()} is not on the agent's allowlist (the allowlist is empty)`,
      );
    });

    test('behavior: the demo agent starts with an empty allowlist and is denied', async () => {
      const r = await sign(direct(s.bootstrap.agent_id, 0.5));
      expect(r.status).toBe(403);
      expect(r.json.reason).toMatch(/allowlist is empty/);
    });

    test('behavior: the spend cap counts signed payments; reaching it exactly is allowed, going over is denied', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '10' });
      expect((await sign(direct(agentId, 6))).status).toBe(200);
      await expectDenied(
        await sign(direct(agentId, 4.000001)),
        'Spend cap of $10 per 24 hours would be exceeded: $6 already committed, this payment is $4.000001 ($4 left)',
      );
      expect((await sign(direct(agentId, 4))).status).toBe(200);
      await expectDenied(
        await sign(direct(agentId, 0.000001)),
        'Spend cap of $10 per 24 hours would be exceeded: $10 already committed, this payment is $0.000001 ($0 left)',
      );
    });

    test('behavior: a single payment above the cap is denied, not sent for approval', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '1' });
      await expectDenied(
        await sign(direct(agentId, 11)),
        'Spend cap of $10 per 24 hours would be exceeded: $0 already committed, this payment is $11 ($10 left)',
      );
    });

    test('behavior: pending approvals count against the cap', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '1' });
      expect((await sign(direct(agentId, 6))).status).toBe(202);
      await expectDenied(
        await sign(direct(agentId, 5)),
        'Spend cap of $10 per 24 hours would be exceeded: $6 already committed, this payment is $5 ($4 left)',
      );
      expect((await sign(direct(agentId, 4))).status).toBe(202);
    });

    test('behavior: denied payments do not count against the cap', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '10' });
      expect((await sign({ ...direct(agentId, 9), recipient_address: STRANGER })).status).toBe(403);
      expect((await sign(direct(agentId, 11))).status).toBe(403);
      expect((await sign(direct(agentId, 10))).status).toBe(200);
    });

    test('behavior: an expired approval no longer counts against the cap', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '5' });
      const pending = await sign(direct(agentId, 8));
      expect(pending.status).toBe(202);
      expect((await sign(direct(agentId, 5))).status).toBe(403);
      clock += 3600 * 1000 + 1;
      expect((await approvalStatus(pending.json.approval_request_id)).json.status).toBe('expired');
      const r = await sign(direct(agentId, 5));
      expect(r.status).toBe(200);
      expect(await eip3009Signer(r.json)).toBe(treasury);
    });

    test('behavior: the cap is over a rolling 24 hours', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '10' });
      const start = clock;
      expect((await sign(direct(agentId, 10))).status).toBe(200);
      clock = start + 24 * 3600 * 1000 - 1;
      await expectDenied(
        await sign(direct(agentId, 1)),
        'Spend cap of $10 per 24 hours would be exceeded: $10 already committed, this payment is $1 ($0 left)',
      );
      clock = start + 24 * 3600 * 1000 + 1;
      expect((await sign(direct(agentId, 10))).status).toBe(200);
    });

    test('behavior: concurrent payments are checked atomically and never exceed the cap together', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '10' });
      const all = await Promise.all(Array.from({ length: 10 }, (_, i) => sign(direct(agentId, 3, i % 2 === 0 ? 'eip3009' : 'permit2'))));
      expect(all.filter((r) => r.status === 200)).toHaveLength(3);
      expect(all.filter((r) => r.status === 403)).toHaveLength(7);
      for (const r of all.filter((x) => x.status === 403)) {
        expect(r.json.reason).toBe('Spend cap of $10 per 24 hours would be exceeded: $9 already committed, this payment is $3 ($1 left)');
      }
      const rows = await ledger(agentId);
      expect(rows.filter((t) => t.status === 'signed').map((t) => t.amountUsd)).toEqual(['3', '3', '3']);
      expect(rows.filter((t) => t.status === 'denied')).toHaveLength(7);
    });

    test('behavior: status is checked before the allowlist and the cap', async () => {
      const agentId = await agentWith({ allowlist: [], cap: '0' });
      await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
      await expectDenied(await sign(direct(agentId, 50)), 'Agent is paused; it cannot make payments');
    });

    test('behavior: the allowlist is checked before the cap', async () => {
      const agentId = await agentWith({ cap: '1' });
      await expectDenied(await sign({ ...direct(agentId, 50), recipient_address: STRANGER }), `Recipient ${STRANGER.toLowerCase()} is not on the agent's allowlist`);
    });
  });

  describe('dry_run', () => {
    test('behavior: an allowed dry run answers 200 with the evaluated request and persists nothing', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 0.5, 'eip3009', { dry_run: true }));
      expect(r.status).toBe(200);
      expect(r.json).toEqual({
        dry_run: true, status: 'allowed', agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: 0.5,
      });
      expect(Object.keys(r.json)).toEqual(['dry_run', 'status', 'agent_id', 'type', 'chain_id', 'recipient_address', 'amount_usd']);
      expect(await ledger(agentId)).toEqual([]);
    });

    test('behavior: a dry run needing approval answers 202 with reason and approval_threshold_usd and creates no approval', async () => {
      const agentId = await agentWith({ threshold: '1.25' });
      const r = await sign(direct(agentId, 2.5, 'permit2', { dry_run: true, chain_id: 84532 }));
      expect(r.status).toBe(202);
      expect(r.json).toEqual({
        dry_run: true, status: 'pending_approval', agent_id: agentId, type: 'permit2', chain_id: 84532, recipient_address: RECIPIENT, amount_usd: 2.5,
        reason: 'Amount $2.5 exceeds the approval threshold of 1.25 USD; a human must approve it', approval_threshold_usd: 1.25,
        rule: { kind: 'approval_threshold', window: null, scope: 'agent', recipient: null, limit: '1.25', spent: null },
      });
      expect(await ledger(agentId)).toEqual([]);
      expect(await approvalsOf(agentId)).toEqual([]);
    });

    test('behavior: a denied dry run answers 403 with the reason and records no denial', async () => {
      const agentId = await agentWith();
      const r = await sign({ ...direct(agentId, 3, 'raw_transaction', { dry_run: true }), recipient_address: STRANGER.toLowerCase() });
      expect(r.status).toBe(403);
      expect(r.json).toEqual({
        dry_run: true, status: 'denied', agent_id: agentId, type: 'raw_transaction', chain_id: 8453, recipient_address: STRANGER, amount_usd: 3,
        reason: `Recipient ${STRANGER.toLowerCase()} is not on the agent's allowlist`,
        rule: { kind: 'allowlist', window: null, scope: 'agent', recipient: STRANGER.toLowerCase(), limit: null, spent: null },
      });
      expect(await ledger(agentId)).toEqual([]);
    });

    test('behavior: a dry run of a paused agent answers 403 denied', async () => {
      const agentId = await agentWith();
      await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
      const r = await sign(direct(agentId, 0.5, 'eip3009', { dry_run: true }));
      expect(r.status).toBe(403);
      expect(r.json).toMatchObject({ dry_run: true, status: 'denied', reason: 'Agent is paused; it cannot make payments' });
    });

    test('behavior: a dry run sees committed spending but does not charge the cap', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '10' });
      expect((await sign(direct(agentId, 10, 'eip3009', { dry_run: true }))).status).toBe(200);
      expect((await sign(direct(agentId, 10, 'eip3009', { dry_run: true }))).status).toBe(200);
      expect((await sign(direct(agentId, 7))).status).toBe(200);
      const over = await sign(direct(agentId, 4, 'eip3009', { dry_run: true }));
      expect(over.status).toBe(403);
      expect(over.json.reason).toBe('Spend cap of $10 per 24 hours would be exceeded: $7 already committed, this payment is $4 ($3 left)');
      expect(await ledger(agentId)).toHaveLength(1);
    });

    test('behavior: amount_usd of a dry run is the exact JSON number sent', async () => {
      const agentId = await agentWith({ cap: '1000', threshold: '1000' });
      for (const amount of [0.1, 1.005, 10, 0.000001]) {
        const r = await sign(direct(agentId, amount, 'eip3009', { dry_run: true }));
        expect(r.json.amount_usd).toBe(amount);
      }
    });

    test('behavior: a dry run with an Idempotency-Key stores nothing under the key', async () => {
      const agentId = await agentWith();
      const dry = await sign(direct(agentId, 0.5, 'eip3009', { dry_run: true }), { idem: 'dry-key-1' });
      expect(dry.status).toBe(200);
      expect(dry.json.dry_run).toBe(true);
      const real = await sign(direct(agentId, 0.5), { idem: 'dry-key-1' });
      expect(real.status).toBe(200);
      expect(real.json.idempotent).toBe(false);
      expect(await ledger(agentId)).toHaveLength(1);
    });
  });

  describe('idempotency', () => {
    test('behavior: replaying a 200 returns the same transaction and signature with idempotent true', async () => {
      const agentId = await agentWith();
      const first = await sign(direct(agentId, 0.6), { idem: 'order-200' });
      const again = await sign(direct(agentId, 0.6), { idem: 'order-200' });
      expect(first.status).toBe(200);
      expect(again.status).toBe(200);
      expect(first.json.idempotent).toBe(false);
      expect(again.json).toEqual({ ...first.json, idempotent: true });
      expect(await eip3009Signer(again.json)).toBe(treasury);
      expect(await ledger(agentId)).toHaveLength(1);
    });

    test('behavior: a replay does not charge the cap twice', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '10' });
      for (let i = 0; i < 3; i++) expect((await sign(direct(agentId, 6), { idem: 'cap-once' })).status).toBe(200);
      const rest4 = await sign(direct(agentId, 4));
      expect(rest4.status).toBe(200);
      expect(await ledger(agentId)).toHaveLength(2);
    });

    test('behavior: replaying a raw transaction returns the same serialized transaction and nonce', async () => {
      const agentId = await agentWith();
      const first = await sign(direct(agentId, 0.1, 'raw_transaction'), { idem: 'raw-1' });
      const again = await sign(direct(agentId, 0.1, 'raw_transaction'), { idem: 'raw-1' });
      expect(again.json).toEqual({ ...first.json, idempotent: true });
      expect(again.json.raw_transaction.serialized).toBe(first.json.raw_transaction.serialized);
    });

    test('behavior: replaying a 202 returns the same transaction and approval request', async () => {
      const agentId = await agentWith();
      const first = await sign(direct(agentId, 2), { idem: 'order-202' });
      const again = await sign(direct(agentId, 2), { idem: 'order-202' });
      expect(first.status).toBe(202);
      expect(again.status).toBe(202);
      expect(again.json).toEqual(first.json);
      expect(await approvalsOf(agentId)).toHaveLength(1);
    });

    test('behavior: replaying a 403 returns the same denial even after the policy changed', async () => {
      const agentId = await agentWith({ allowlist: [] });
      const first = await sign(direct(agentId, 0.5), { idem: 'order-403' });
      expect(first.status).toBe(403);
      await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '10', approvalThresholdUsd: '1' }, admin.auth);
      const again = await sign(direct(agentId, 0.5), { idem: 'order-403' });
      expect(again.status).toBe(403);
      expect(again.json).toEqual(first.json);
      expect(await ledger(agentId)).toHaveLength(1);
    });

    test('behavior: a replay differing only in dry_run is the same request', async () => {
      const agentId = await agentWith();
      const first = await sign(direct(agentId, 0.5), { idem: 'dry-after' });
      const again = await sign(direct(agentId, 0.5, 'eip3009', { dry_run: false }), { idem: 'dry-after' });
      expect(again.json.transaction_id).toBe(first.json.transaction_id);
      expect(again.json.idempotent).toBe(true);
    });

    test('behavior: the same amount written differently is the same request', async () => {
      const agentId = await agentWith();
      const first = await sign(direct(agentId, 0.5), { idem: 'spelling' });
      const again = await sign({ ...direct(agentId, 0.5), amount_usd: 0.50, recipient_address: RECIPIENT.toLowerCase(), chain_id: 8453 }, { idem: 'spelling' });
      expect(again.status).toBe(200);
      expect(again.json.transaction_id).toBe(first.json.transaction_id);
    });

    test('behavior: keys are scoped to the agent', async () => {
      const a = await agentWith();
      const b = await agentWith();
      const ra = await sign(direct(a, 0.5), { idem: 'shared-key' });
      const rb = await sign(direct(b, 0.5), { idem: 'shared-key' });
      expect(ra.status).toBe(200);
      expect(rb.status).toBe(200);
      expect(rb.json.idempotent).toBe(false);
      expect(rb.json.transaction_id).not.toBe(ra.json.transaction_id);
    });

    test('error: a key reused with a different body is 409 idempotency_key_reused and charges nothing', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '10' });
      expect((await sign(direct(agentId, 1), { idem: 'reuse' })).status).toBe(200);
      for (const changed of [direct(agentId, 2), direct(agentId, 1, 'permit2'), { ...direct(agentId, 1), chain_id: 84532 }, { ...direct(agentId, 1), payload: { valid_for_seconds: 60 } }]) {
        const r = await sign(changed, { idem: 'reuse' });
        expect(r.status).toBe(409);
        expect(r.json).toEqual({ error: 'Idempotency-Key was already used for a different request', code: 'idempotency_key_reused' });
      }
      expect(await ledger(agentId)).toHaveLength(1);
    });

    test('error: reusing the key of a denied request with another body is also 409', async () => {
      const agentId = await agentWith({ allowlist: [] });
      expect((await sign(direct(agentId, 1), { idem: 'denied-reuse' })).status).toBe(403);
      const r = await sign({ ...direct(agentId, 1), recipient_address: STRANGER }, { idem: 'denied-reuse' });
      expect(r.status).toBe(409);
      expect(r.json.code).toBe('idempotency_key_reused');
    });

    test('behavior: concurrent requests with one key sign once', async () => {
      const agentId = await agentWith({ cap: '10', threshold: '10' });
      const all = await Promise.all(Array.from({ length: 5 }, () => sign(direct(agentId, 3), { idem: 'race' })));
      expect(all.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      expect(new Set(all.map((r) => r.json.transaction_id)).size).toBe(1);
      expect(new Set(all.map((r) => r.json.signature)).size).toBe(1);
      expect(all.filter((r) => r.json.idempotent === false)).toHaveLength(1);
      expect(await ledger(agentId)).toHaveLength(1);
    });
  });

  describe('approval flow through replay', () => {
    test('behavior: after a human approves, the replay answers 200 with a treasury signature', async () => {
      const agentId = await agentWith();
      const pending = await sign(direct(agentId, 3), { idem: 'approve-me' });
      expect(pending.status).toBe(202);
      await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE, note: '', decidedBy: 'alice' }, admin.auth);
      const after = await sign(direct(agentId, 3), { idem: 'approve-me' });
      expect(after.status).toBe(200);
      expect(after.json).toMatchObject({ transaction_id: pending.json.transaction_id, idempotent: true, cost_usd: '3', agent_id: agentId });
      expect(after.json.authorization.value).toBe('3000000');
      expect(await eip3009Signer(after.json)).toBe(treasury);
    });

    test('behavior: after a human denies, the replay answers 403 with the approver\'s note', async () => {
      const agentId = await agentWith();
      const pending = await sign(direct(agentId, 3), { idem: 'deny-me' });
      await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.DENY, note: 'too pricey', decidedBy: 'bob' }, admin.auth);
      const after = await sign(direct(agentId, 3), { idem: 'deny-me' });
      expect(after.status).toBe(403);
      expect(after.json).toEqual({ error: 'Policy denied', reason: 'Denied by approver: too pricey', transaction_id: pending.json.transaction_id });
    });

    test('behavior: after the window passes, the replay answers 403 expired', async () => {
      const agentId = await agentWith();
      const pending = await sign(direct(agentId, 3), { idem: 'expire-me' });
      clock += 3600 * 1000 + 1;
      const after = await sign(direct(agentId, 3), { idem: 'expire-me' });
      expect(after.status).toBe(403);
      expect(after.json).toEqual({ error: 'Policy denied', reason: 'Approval request expired before a human decided', transaction_id: pending.json.transaction_id });
    });
  });

  describe('errors', () => {
    const expectError = (r: RestResult, status: number, error: string, code: string) => {
      expect(r.status).toBe(status);
      expect(r.json).toEqual({ error, code });
    };

    test('error: a missing agent_id is 400 agent_id_required', async () => {
      expectError(await sign({ type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 1 }), 400, 'agent_id is required', 'agent_id_required');
    });

    test('error: a non-string agent_id is 400 naming agent_id', async () => {
      expectError(await sign({ agent_id: 42, recipient_address: RECIPIENT, amount_usd: 1 }), 400, 'agent_id must be a string', 'invalid_argument');
    });

    test('error: an unknown type is 400 unsupported_type', async () => {
      const agentId = await agentWith();
      expectError(await sign(direct(agentId, 1, 'bitcoin')), 400, 'type must be one of eip3009, permit2, raw_transaction, x402, mpp', 'unsupported_type');
      expectError(await sign(direct(agentId, 1, 7 as unknown as string)), 400, 'type must be one of eip3009, permit2, raw_transaction, x402, mpp', 'unsupported_type');
    });

    test('error: a chain other than 8453 and 84532 is 400 unsupported_chain for a test key', async () => {
      const agentId = await agentWith();
      expectError(
        await sign(direct(agentId, 1, 'eip3009', { chain_id: 1 })),
        400, 'chain_id 1 is not supported for eip3009 with ak_test_ keys (supported: 8453, 84532)', 'unsupported_chain',
      );
    });

    test('error: a live key may not sign on Base Sepolia', async () => {
      const agentId = await agentWith();
      expectError(
        await sign(direct(agentId, 1, 'permit2', { chain_id: 84532 }), { key: liveKey }),
        400, 'chain_id 84532 is not supported for permit2 with ak_live_ keys (supported: 8453)', 'unsupported_chain',
      );
    });

    test.each(['8453', 0, -8453, 8453.5, true])('error: chain_id %j that is not a positive integer is 400', async (chainId) => {
      const agentId = await agentWith();
      expectError(await sign(direct(agentId, 0.5, 'eip3009', { chain_id: chainId })), 400, 'chain_id must be a positive integer', 'invalid_argument');
    });

    test('error: chain_id null is 400, not the default 8453 (no request field is nullable; leaving it out takes the default)', async () => {
      const agentId = await agentWith();
      expectError(await sign(direct(agentId, 0.5, 'eip3009', { chain_id: null })), 400, 'chain_id must be a positive integer', 'invalid_argument');
      expect(await ledger(agentId)).toEqual([]);
      const omitted = await sign(direct(agentId, 0.5, 'eip3009'));
      expect(omitted.status).toBe(200);
      expect(omitted.json.chain_id).toBe(8453);
    });

    test('error: a missing recipient is 400 recipient_required', async () => {
      const agentId = await agentWith();
      expectError(await sign({ agent_id: agentId, type: 'eip3009', amount_usd: 1 }), 400, 'recipient_address is required for type eip3009', 'recipient_required');
    });

    test.each(['0x1234', 'vitalik.eth', RECIPIENT.slice(2), 12])('error: recipient %j that is not a 0x address is 400', async (recipient) => {
      const agentId = await agentWith();
      expectError(await sign({ ...direct(agentId, 1), recipient_address: recipient }), 400, 'recipient_address must be a 0x-prefixed 20-byte hex address', 'invalid_argument');
    });

    test('error: the zero address is 400', async () => {
      const agentId = await agentWith();
      expectError(
        await sign({ ...direct(agentId, 1), recipient_address: '0x0000000000000000000000000000000000000000' }),
        400, 'recipient_address must not be the zero address', 'invalid_argument',
      );
    });

    test('error: a missing amount is 400 amount_required', async () => {
      const agentId = await agentWith();
      expectError(await sign({ agent_id: agentId, type: 'permit2', recipient_address: RECIPIENT }), 400, 'amount_usd is required for type permit2', 'amount_required');
    });

    test('error: a zero amount is 400', async () => {
      const agentId = await agentWith();
      expectError(await sign(direct(agentId, 0)), 400, 'amount_usd must be greater than 0', 'invalid_amount');
    });

    test.each([-1, -0.5, 0.0000001, 1.0000001, 1e21])('error: amount %d (negative or more than 6 decimals) is 400 naming amount_usd', async (amount) => {
      const agentId = await agentWith();
      expectError(await sign(direct(agentId, amount)), 400, 'amount_usd must be a non-negative decimal number with at most 6 decimal places', 'invalid_amount');
    });

    test('error: an amount above one billion is 400', async () => {
      const agentId = await agentWith();
      expectError(await sign(direct(agentId, 1_000_000_001)), 400, 'amount_usd must be at most 1000000000', 'invalid_amount');
    });

    test.each([true, { usd: 1 }, [1]])('error: amount %j that is not a number is 400', async (amount) => {
      const agentId = await agentWith();
      const r = await sign({ ...direct(agentId, 1), amount_usd: amount });
      expectError(r, 400, 'amount_usd must be a number', 'invalid_argument');
    });

    test.each(['{"a":1}', [1], 5])('error: payload %j that is not an object is 400', async (payload) => {
      const agentId = await agentWith();
      expectError(await sign(direct(agentId, 1, 'eip3009', { payload })), 400, 'payload must be an object', 'invalid_argument');
    });

    test.each([29, 86_401, '60'])('error: payload.valid_for_seconds %j is 400', async (v) => {
      const agentId = await agentWith();
      expectError(
        await sign(direct(agentId, 1, 'eip3009', { payload: { valid_for_seconds: v } })),
        400, 'payload.valid_for_seconds must be an integer from 30 to 86400', 'invalid_argument',
      );
    });

    test.each([20_999, 1_000_001])('error: raw transaction gas %d outside 21000..1000000 is 400', async (gas) => {
      const agentId = await agentWith();
      expectError(
        await sign(direct(agentId, 1, 'raw_transaction', { payload: { gas } })),
        400, 'payload.gas must be an integer (decimal string) from 21000 to 1000000', 'invalid_argument',
      );
    });

    test('error: a raw transaction max fee above 1000 gwei is 400', async () => {
      const agentId = await agentWith();
      const r = await sign(direct(agentId, 1, 'raw_transaction', { payload: { max_fee_per_gas: '1000000000001' } }));
      expect(r.status).toBe(400);
      expect(r.json.error).toMatch(/^payload\.max_fee_per_gas/);
    });

    test('error: dry_run that is not a boolean is 400', async () => {
      const agentId = await agentWith();
      expectError(await sign(direct(agentId, 1, 'eip3009', { dry_run: 'yes' })), 400, 'dry_run must be a boolean', 'invalid_argument');
    });

    test.each([['with a space', 'a b'], ['too long', 'k'.repeat(256)]])('error: an Idempotency-Key %s is 400 invalid_idempotency_key', async (_what, key) => {
      const agentId = await agentWith();
      expectError(
        await sign(direct(agentId, 1), { idem: key }),
        400, 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces', 'invalid_idempotency_key',
      );
      expect(await ledger(agentId)).toEqual([]);
    });

    test.each(['x402', 'mpp'])('error: type %s without payload.resource_url is 400 resource_url_required', async (type) => {
      const agentId = await agentWith();
      expectError(await sign({ agent_id: agentId, type }), 400, `payload.resource_url is required for type ${type}`, 'resource_url_required');
    });

    test('error: invalid JSON and non-object bodies are 400 invalid_json', async () => {
      const bad = await rest(s.url, 'POST', '/api/sign', { key: s.bootstrap.api_key, rawBody: '{"agent_id":', headers: { 'content-type': 'application/json' } });
      expectError(bad, 400, 'Request body is not valid JSON', 'invalid_json');
      const arr = await sign([{ agent_id: 'agt_x' }]);
      expectError(arr, 400, 'Request body must be a JSON object', 'invalid_json');
    });

    test('error: an unknown agent is 404 agent_not_found', async () => {
      expectError(await sign(direct('agt_000000000000000000000000', 1)), 404, 'Agent not found', 'agent_not_found');
    });

    test('error: a malformed agent id is the same 404', async () => {
      expectError(await sign(direct('robot-7', 1)), 404, 'Agent not found', 'agent_not_found');
    });

    test('error: another organization\'s agent is the same 404 and nothing is recorded for it', async () => {
      expectError(await sign(direct(bare.agentId, 1)), 404, 'Agent not found', 'agent_not_found');
      const rows = (await admin.client.listTransactions({ orgId: bare.orgId, agentId: bare.agentId }, admin.auth)).transactions;
      expect(rows).toEqual([]);
    });

    test('error: an organization without a treasury is 503 treasury_not_provisioned', async () => {
      const r = await sign(direct(bare.agentId, 0.5), { key: bare.apiKey });
      expectError(r, 503, 'Organization treasury not provisioned', 'treasury_not_provisioned');
      const rows = (await admin.client.listTransactions({ orgId: bare.orgId, agentId: bare.agentId }, admin.auth)).transactions;
      expect(rows).toEqual([]);
    });

    test('error: an unprovisioned organization still gets 404 for an unknown agent before 503', async () => {
      expectError(await sign(direct('agt_000000000000000000000000', 0.5), { key: bare.apiKey }), 404, 'Agent not found', 'agent_not_found');
    });

    test('error: no key is 401 and a wrong key is 401, before the body is looked at', async () => {
      const none = await rest(s.url, 'POST', '/api/sign', { body: { nonsense: true } });
      expectError(none, 401, 'Missing Authorization header', 'unauthenticated');
      const wrong = await sign({ nonsense: true }, { key: `ak_test_${'0'.repeat(48)}` });
      expect(wrong.status).toBe(401);
      expect(wrong.json.code).toBe('unauthenticated');
    });
  });
});

describe('GET /api/approvals/{id}/status', () => {
  test('behavior: a pending approval answers exactly status, decided_at null, expires_at, transaction_id', async () => {
    const agentId = await agentWith();
    const created = clock;
    const pending = await sign(direct(agentId, 2));
    const r = await approvalStatus(pending.json.approval_request_id);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      status: 'pending',
      decided_at: null,
      expires_at: new Date(created + 3600 * 1000).toISOString(),
      transaction_id: pending.json.transaction_id,
    });
    expect(r.json.expires_at).toMatch(ISO_RE);
    expect(Object.keys(r.json)).toEqual(['status', 'decided_at', 'expires_at', 'transaction_id']);
  });

  test('behavior: an approved request reports approved with decided_at', async () => {
    const agentId = await agentWith();
    const created = clock;
    const pending = await sign(direct(agentId, 2));
    clock += 60_000;
    const decided = clock;
    await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE, note: 'ok', decidedBy: 'carol' }, admin.auth);
    const r = await approvalStatus(pending.json.approval_request_id);
    expect(r.json).toEqual({
      status: 'approved',
      decided_at: new Date(decided).toISOString(),
      expires_at: new Date(created + 3600 * 1000).toISOString(),
      transaction_id: pending.json.transaction_id,
    });
    const [row] = await ledger(agentId);
    expect(row).toMatchObject({ id: pending.json.transaction_id, status: 'signed' });
  });

  test('behavior: a denied request reports denied with decided_at', async () => {
    const agentId = await agentWith();
    const pending = await sign(direct(agentId, 2));
    await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.DENY, note: '', decidedBy: '' }, admin.auth);
    const r = await approvalStatus(pending.json.approval_request_id);
    expect(r.json).toEqual({
      status: 'denied', decided_at: new Date(clock).toISOString(), expires_at: expect.stringMatching(ISO_RE), transaction_id: pending.json.transaction_id,
    });
  });

  test('behavior: an approval past its window reports expired with decided_at null', async () => {
    const agentId = await agentWith();
    const created = clock;
    const pending = await sign(direct(agentId, 2));
    clock += 3600 * 1000;
    const r = await approvalStatus(pending.json.approval_request_id);
    expect(r.json).toEqual({
      status: 'expired', decided_at: null, expires_at: new Date(created + 3600 * 1000).toISOString(), transaction_id: pending.json.transaction_id,
    });
  });

  test('error: an unknown UUID is 404 with an empty body', async () => {
    const r = await approvalStatus('00000000-0000-4000-8000-000000000000');
    expect(r.status).toBe(404);
    expect(r.text).toBe('');
    expect(r.headers.get('content-length')).toBe('0');
  });

  test.each(['not-a-uuid', '12345', 'ZZZZZZZZ-0000-4000-8000-000000000000', '%E0%A4%A'])('error: a non-UUID id %j is 404 with an empty body', async (id) => {
    const r = await approvalStatus(id);
    expect(r.status).toBe(404);
    expect(r.text).toBe('');
  });

  test('error: another organization\'s approval is 404 with an empty body', async () => {
    const agentId = await agentWith();
    const pending = await sign(direct(agentId, 2));
    expect((await approvalStatus(pending.json.approval_request_id)).status).toBe(200);
    const r = await approvalStatus(pending.json.approval_request_id, bare.apiKey);
    expect(r.status).toBe(404);
    expect(r.text).toBe('');
  });

  test('error: a transaction id is not an approval id', async () => {
    const agentId = await agentWith();
    const pending = await sign(direct(agentId, 2));
    const r = await approvalStatus(pending.json.transaction_id);
    expect(r.status).toBe(404);
    expect(r.text).toBe('');
  });

  test('error: no key is 401 even for an existing approval', async () => {
    const agentId = await agentWith();
    const pending = await sign(direct(agentId, 2));
    const r = await rest(s.url, 'GET', `/api/approvals/${pending.json.approval_request_id}/status`);
    expect(r.status).toBe(401);
    expect(r.json).toEqual({ error: 'Missing Authorization header', code: 'unauthenticated' });
  });
});
