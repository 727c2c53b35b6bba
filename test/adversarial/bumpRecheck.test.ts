import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { AgentStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createAgent } from '../helpers/admin.js';
import { createLocalChain, installMiniUsdc, type LocalChain } from '../helpers/localChain.js';
import { postSign } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A fee bump is a new signature by the treasury's key: like the collection of an approved payment,
 * it is made only if the agent's policy as it stands then still allows the payment (agent active,
 * recipient on the allowlist, the bumped fee within the ceiling). Otherwise a payment whose agent
 * was revoked, or whose recipient was taken off the allowlist, after signing would be re-signed
 * with higher fees every --replace-after-ms. Without the bump the original stays as it is and is
 * still tracked. Run on a real EDR chain with automine off.
 */
const CHAIN = 84532;
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x8888888888888888888888888888888888888888';

let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let s: TestServer;

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  s = await startTestServer({ rpcUrls: new Map([[CHAIN, node.url]]), submitIntervalMs: 40, logLevel: 'info', tracking: { confirmations: 1, replaceAfterMs: 1_000 } });
  await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, deployerKey, [{ to: s.bootstrap.treasury_address as Address, amount: 100_000_000n }]);
}, 30_000);
afterAll(async () => {
  await chain?.rpc('evm_setAutomine', [true]).catch(() => {});
  await s?.close();
  await node?.close();
});

/** Mines the pool and waits for the row to be confirmed by its original transaction. */
async function expectOriginalConfirmed(id: string, original: Hex): Promise<void> {
  await chain.rpc('hardhat_mine', ['0x1']);
  await chain.rpc('evm_setAutomine', [true]);
  for (const until = Date.now() + 10_000; s.app.store.payments.get(id)!.submitStatus !== 'confirmed';) {
    if (Date.now() > until) throw new Error('not confirmed');
    await new Promise((res) => setTimeout(res, 25));
  }
  expect(s.app.store.payments.get(id)!.txHash).toBe(original);
}

describe('fee bumps re-check the policy', () => {
  test.each([
    ['the agent is revoked', async (admin: ReturnType<typeof adminFor>, agentId: string) => {
      await admin.client.updateAgent({ agentId, status: AgentStatus.REVOKED }, admin.auth);
    }],
    ['the agent is paused', async (admin: ReturnType<typeof adminFor>, agentId: string) => {
      await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
    }],
    ['the recipient is taken off the allowlist', async (admin: ReturnType<typeof adminFor>, agentId: string) => {
      await admin.client.setPolicy({ agentId, allowlist: ['0x9999999999999999999999999999999999999999'], spendCapUsd: '10', approvalThresholdUsd: '1000' }, admin.auth);
    }],
  ])('error: after signing, %s: no fee bump is signed (logged once), the original stays and is confirmed once mined', async (name, change) => {
    const admin = adminFor(s);
    const agentId = await createAgent(admin, s.bootstrap.org_id, `bump-${name.replace(/\W+/g, '-')}`);
    await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '10', approvalThresholdUsd: '1000' }, admin.auth);
    await chain.rpc('evm_setAutomine', [false]);
    const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.10' }, `bump-${name.replace(/\W+/g, '-')}`);
    expect(r.status, r.text).toBe(200);
    const id = r.json.transaction_id as string;
    const original = r.json.tx_hash as Hex;
    expect(original).toBe(r.json.raw_transaction.hash);
    await change(admin, agentId);

    // More than two bump periods pass while the transaction waits in the pool.
    await new Promise((res) => setTimeout(res, 2_600));
    expect(s.app.store.payments.attempts(id)).toEqual([]);
    const row = s.app.store.payments.get(id)!;
    expect(row.submitStatus).toBe('submitted');
    expect(row.txHash).toBe(original);
    expect(await chain.rpc('eth_getTransactionByHash', [original])).not.toBeNull();
    expect(s.logs.filter((l) => l.includes(id) && l.includes('no longer allows'))).toHaveLength(1);

    await expectOriginalConfirmed(id, original);
  });

  // The check above ran before the bump was signed; a change acknowledged while the signing
  // thread worked must still stop it: the bump's recording write checks the policy again.
  test.each([
    ['the agent is paused', async (admin: ReturnType<typeof adminFor>, agentId: string) => {
      await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
    }],
    ['the network fee ceiling is lowered to zero', async (admin: ReturnType<typeof adminFor>, agentId: string) => {
      await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '10', approvalThresholdUsd: '1000', maxNetworkFeeWei: '0' }, admin.auth);
    }],
  ])('error: %s while the bump is being signed: the bump is neither recorded nor broadcast', async (name, change) => {
    const admin = adminFor(s);
    const slug = `bump-signing-${name.replace(/\W+/g, '-')}`;
    const agentId = await createAgent(admin, s.bootstrap.org_id, slug);
    await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '10', approvalThresholdUsd: '1000' }, admin.auth);
    await chain.rpc('evm_setAutomine', [false]);
    const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.10' }, slug);
    expect(r.status, r.text).toBe(200);
    const id = r.json.transaction_id as string;
    const original = r.json.tx_hash as Hex;
    const nonce = Number(r.json.raw_transaction.nonce);

    // The real signing thread signs the bump; the change is made and acknowledged before its answer comes back.
    const signer = s.app.deps.signer;
    const sign = signer.sign.bind(signer);
    let changed = 0;
    signer.sign = async (job) => {
      const out = await sign(job);
      if (job.kind === 'eip1559' && job.tx.nonce === nonce && changed === 0) {
        changed++;
        await change(admin, agentId);
      }
      return out;
    };
    try {
      for (const until = Date.now() + 5_000; changed === 0;) {
        if (Date.now() > until) throw new Error('no bump was signed');
        await new Promise((res) => setTimeout(res, 25));
      }
      // Two more bump periods: the next passes see the change before signing.
      await new Promise((res) => setTimeout(res, 2_200));
    } finally {
      signer.sign = sign;
    }
    expect(s.app.store.payments.attempts(id)).toEqual([]);
    expect(s.app.store.payments.get(id)!.txHash).toBe(original);
    const pool = await chain.rpc('txpool_content', []).catch(() => undefined) as { pending?: Record<string, Record<string, { hash: string }>> } | undefined;
    const inPool = Object.values(pool?.pending ?? {}).flatMap((byNonce) => Object.values(byNonce).map((t) => t.hash.toLowerCase()));
    if (pool) expect(inPool.filter((h) => h !== original.toLowerCase())).toEqual([]);

    await expectOriginalConfirmed(id, original);
  });
});
