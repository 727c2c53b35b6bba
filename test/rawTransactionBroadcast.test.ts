import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseTransaction, recoverTransactionAddress, getAddress, type Address, type TransactionSerializedEIP1559 } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { Decision } from '../gen/paypolicy/v1/admin_pb.js';
import { PaymentPolicyService, PaymentType } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createTenant, type Admin, type Tenant } from './helpers/admin.js';
import { grpcChannel, grpcUnary } from './helpers/clients.js';
import { createLocalChain, installMiniUsdc, type LocalChain } from './helpers/localChain.js';
import { listAllTransactions, postSign, setPolicy } from './helpers/payments.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * A signed raw transaction has no expiry: handed to an agent, it can be broadcast whenever the
 * agent likes, so a few signed on different days could all land in one minute, outside every cap
 * window. A live key's raw transaction is signed only where paypolicy broadcasts it itself.
 */

const BASE = 8453;
const BASE_USDC: Address = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const RECIPIENT = '0x2222222222222222222222222222222222222222';
const raw = (agentId: string, amount = '0.25', more: Record<string, unknown> = {}) => ({ agent_id: agentId, type: 'raw_transaction', chain_id: BASE, recipient_address: RECIPIENT, amount_usd: amount, ...more });

describe('raw transactions without an RPC endpoint for their chain', () => {
  let s: TestServer;
  let admin: Admin;
  let live: Tenant;
  let test_: Tenant;

  beforeAll(async () => {
    s = await startTestServer({ logLevel: 'warn' });
    admin = adminFor(s);
    live = await createTenant(admin, 'live-org', 'live');
    test_ = await createTenant(admin, 'test-org', 'test');
    for (const t of [live, test_]) {
      await admin.client.provisionTreasury({ orgId: t.orgId }, admin.auth);
      await setPolicy(admin, t.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '50' });
    }
  });
  afterAll(() => s?.close());

  test('error: a live key\'s raw_transaction is refused with 400 raw_transaction_not_broadcast, also as the default type and as a dry run, and writes nothing', async () => {
    const bodies = [raw(live.agentId), { agent_id: live.agentId, recipient_address: RECIPIENT, amount_usd: '0.25' }, raw(live.agentId, '0.25', { dry_run: true }), raw(live.agentId, '75')];
    for (const [i, body] of bodies.entries()) {
      const r = await postSign(s.url, live.apiKey, body, `refused-${i}`);
      expect([i, r.status, r.json.code]).toEqual([i, 400, 'raw_transaction_not_broadcast']);
      expect(r.json.error).toMatch(/--rpc-url 8453=URL/);
    }
    expect(await listAllTransactions(admin, live.orgId, live.agentId)).toEqual([]);
  });

  test('error: the same refusal over gRPC is INVALID_ARGUMENT', async () => {
    const ch = grpcChannel(s.url);
    try {
      const r = await grpcUnary(ch, PaymentPolicyService, PaymentPolicyService.method.sign, {
        agentId: live.agentId, type: PaymentType.RAW_TRANSACTION, chainId: BASE, recipientAddress: RECIPIENT, amountUsd: '0.25', idempotencyKey: 'grpc-1',
      }, live.apiKey);
      expect(r.ok ? 'signed' : [r.code, r.details]).toEqual([grpc.status.INVALID_ARGUMENT, expect.stringMatching(/signed for ak_live_ keys only when paypolicy broadcasts it/)]);
    } finally {
      ch.close();
    }
    expect(await listAllTransactions(admin, live.orgId, live.agentId)).toEqual([]);
  });

  test('behavior: a test key still receives its raw transaction to broadcast itself', async () => {
    const r = await postSign(s.url, test_.apiKey, raw(test_.agentId), 'test-1');
    expect(r.status, r.text).toBe(200);
    expect(r.json.tx_hash).toBeNull();
    const serialized = r.json.raw_transaction.serialized as TransactionSerializedEIP1559;
    expect(parseTransaction(serialized).chainId).toBe(BASE);
  });
});

describe('an approved raw transaction is collected only while paypolicy can broadcast it', () => {
  let chain: LocalChain;
  let node: Awaited<ReturnType<LocalChain['listen']>>;
  let s: TestServer;
  let admin: Admin;
  let live: Tenant;
  let treasury: Address;
  const rpcUrls = () => new Map([[BASE, node.url]]);

  beforeAll(async () => {
    const deployerKey = generatePrivateKey();
    chain = await createLocalChain({ chainId: BASE, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
    node = await chain.listen();
    s = await startTestServer({ logLevel: 'warn', rpcUrls: rpcUrls(), submitIntervalMs: 50 });
    admin = adminFor(s);
    live = await createTenant(admin, 'live-org', 'live');
    treasury = getAddress((await admin.client.provisionTreasury({ orgId: live.orgId }, admin.auth)).treasuryAddress);
    await chain.rpc('hardhat_setBalance', [treasury, '0x56bc75e2d63100000']);
    await installMiniUsdc(chain, BASE_USDC, deployerKey, [{ to: treasury, amount: 100_000_000n }]);
    await setPolicy(admin, live.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '1' });
  }, 60_000);
  afterAll(async () => {
    await s?.close();
    await node?.close();
  });

  test('behavior: asked with an endpoint, approved and collected while restarted without one: refused and left approved; collected once it is back', async () => {
    const first = await postSign(s.url, live.apiKey, raw(live.agentId, '5'), 'collect-1');
    expect(first.status, first.text).toBe(202);

    await s.close({ keepData: true });
    s = await startTestServer({ logLevel: 'warn', dataDir: s.dataDir });
    admin = adminFor(s);
    await admin.client.decideApproval({ id: first.json.approval_request_id, decision: Decision.APPROVE, note: '', decidedBy: 'alice' }, admin.auth);
    const refused = await postSign(s.url, live.apiKey, raw(live.agentId, '5'), 'collect-1');
    expect([refused.status, refused.json.code]).toEqual([400, 'raw_transaction_not_broadcast']);
    expect((await listAllTransactions(admin, live.orgId, live.agentId)).map((t) => t.status)).toEqual(['approved']);

    await s.close({ keepData: true });
    s = await startTestServer({ logLevel: 'warn', dataDir: s.dataDir, rpcUrls: rpcUrls(), submitIntervalMs: 50 });
    const collected = await postSign(s.url, live.apiKey, raw(live.agentId, '5'), 'collect-1');
    expect(collected.status, collected.text).toBe(200);
    const serialized = collected.json.raw_transaction.serialized as TransactionSerializedEIP1559;
    expect(await recoverTransactionAddress({ serializedTransaction: serialized })).toBe(treasury);
    expect(collected.json.tx_hash).toBe(collected.json.raw_transaction.hash);
    // A repeat after it was signed replays the same transaction.
    const again = await postSign(s.url, live.apiKey, raw(live.agentId, '5'), 'collect-1');
    expect([again.status, again.json.raw_transaction?.hash, again.json.idempotent]).toEqual([200, collected.json.raw_transaction.hash, true]);
  }, 60_000);
});
