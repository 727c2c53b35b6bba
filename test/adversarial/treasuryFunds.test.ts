import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor, createTenant, type Tenant } from '../helpers/admin.js';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from '../helpers/localChain.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { encodeAbiParameters, encodeFunctionData, keccak256, pad, toHex } from 'viem';
import { Code, type ConnectError } from '@connectrpc/connect';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { ApprovalStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';

/**
 * Treasury balances: a raw transaction the treasury cannot pay (token or gas) is refused with a
 * 403 reason before anything is signed or broadcast, counting what the treasury has already signed
 * and the chain has not mined; a concurrent burst cannot together spend more than the balance; a
 * node that does not answer the balance check refuses (503 chain_unavailable) without writing.
 * Real server, real EDR chain on loopback, real MiniUSDC at USDC's address.
 */

const CHAIN = 84532;
const USDC_84532: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x5555555555555555555555555555555555555555';
/** The default raw-transaction fee bound: 100,000 gas × 1 gwei. */
const DEFAULT_FEE_WEI = 100_000n * 10n ** 9n;

let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let s: TestServer;
let deployerKey: `0x${string}`;
let minted: Set<string>;

const hex = (n: bigint) => `0x${n.toString(16)}`;
const treasuryOf = async (t: Tenant): Promise<Address> => {
  const r = await adminFor(s).client.listOrganizations({}, adminFor(s).auth);
  return r.organizations.find((o) => o.id === t.orgId)!.treasuryAddress as Address;
};
const pendingNonce = async (a: Address) => Number(await chain.rpc('eth_getTransactionCount', [a, 'pending']));
const tokenBalance = async (a: Address) => BigInt(await chain.rpc('eth_call', [{ to: USDC_84532, data: encodeFunctionData({ abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [a] }) }, 'latest']) as string);

/** Sets the treasury's USDC to exactly `micros` (mints the difference up; a fresh treasury starts at 0). */
async function fundUsdc(a: Address, micros: bigint): Promise<void> {
  if (!minted.has('installed')) {
    await installMiniUsdc(chain, USDC_84532, deployerKey, []);
    minted.add('installed');
  }
  const have = await tokenBalance(a);
  if (micros < have) throw new Error('test helper only mints up');
  if (micros > have) await installMiniUsdcMint(a, micros - have);
}
async function installMiniUsdcMint(to: Address, amount: bigint): Promise<void> {
  // The minter is the deployer, fixed in the runtime code: send mint() from it.
  const { createWalletClient, custom, publicActions } = await import('viem');
  const account = privateKeyToAccount(deployerKey);
  const chainDef = { id: CHAIN, name: 'local', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } } as const;
  const wallet = createWalletClient({ account, chain: chainDef, transport: custom({ request: ({ method, params }) => chain.rpc(method, params as unknown[]) }, { retryCount: 0 }) }).extend(publicActions);
  const hash = await wallet.sendTransaction({ to: USDC_84532, data: encodeFunctionData({ abi: MINI_USDC_ABI, functionName: 'mint', args: [to, amount] }) });
  const receipt = await wallet.waitForTransactionReceipt({ hash, pollingInterval: 10 });
  if (receipt.status !== 'success') throw new Error('mint failed');
}

async function tenant(name: string, usdcMicros: bigint, wei: bigint, capUsd = '1000'): Promise<Tenant & { treasury: Address }> {
  const admin = adminFor(s);
  const t = await createTenant(admin, name);
  await admin.client.provisionTreasury({ orgId: t.orgId }, admin.auth);
  await setPolicy(admin, t.agentId, { allowlist: [RECIPIENT], capUsd, thresholdUsd: capUsd });
  const treasury = await treasuryOf(t);
  await chain.rpc('hardhat_setBalance', [treasury, hex(wei)]);
  await fundUsdc(treasury, usdcMicros);
  return { ...t, treasury };
}

const pay = (t: Tenant, amountUsd: string, key: string, payload?: Record<string, unknown>) => postSign(s.url, t.apiKey, {
  agent_id: t.agentId, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: amountUsd, ...(payload ? { payload } : {}),
}, key);

beforeAll(async () => {
  deployerKey = generatePrivateKey();
  minted = new Set();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  s = await startTestServer({ logLevel: 'warn', rpcUrls: new Map([[CHAIN, node.url]]), submitIntervalMs: 50 });
}, 30_000);
afterAll(async () => {
  await s?.close();
  await node?.close();
});

describe('refusing a raw transaction the treasury cannot pay', () => {
  test('error: too little USDC is a 403 with the shortfall in USD; nothing signed or broadcast; the cap is untouched', async () => {
    const t = await tenant('poor-usdc', 1_000_000n, 10n ** 18n, '2');
    const r = await pay(t, '2', 'poor-1');
    expect(r.status, r.text).toBe(403);
    expect(r.json.error).toBe('Policy denied');
    expect(r.json.reason).toContain('treasury_insufficient_funds');
    expect(r.json.reason).toContain('balance $1,');
    expect(r.json.reason).toContain('$1 missing');
    expect(r.json.signature ?? null).toBeNull();
    expect(r.json.raw_transaction).toBeUndefined();
    expect(typeof r.json.transaction_id).toBe('string');
    expect(await pendingNonce(t.treasury)).toBe(0);
    // The repeat replays the denial (a denial is final for its key, like any policy denial).
    const again = await pay(t, '2', 'poor-1');
    expect(again.status).toBe(403);
    expect(again.json.transaction_id).toBe(r.json.transaction_id);
    // Topped up: the whole $2 cap is still there.
    await fundUsdc(t.treasury, 2_000_000n);
    const ok = await pay(t, '2', 'poor-2');
    expect(ok.status, ok.text).toBe(200);
    expect(ok.json.tx_hash).toBe(ok.json.raw_transaction.hash);
    expect(await tokenBalance(RECIPIENT)).toBeGreaterThanOrEqual(2_000_000n);
  });

  test('error: too little ETH for gas × max fee is a 403 with the shortfall in ETH; nothing broadcast', async () => {
    const t = await tenant('poor-gas', 5_000_000n, DEFAULT_FEE_WEI - 1n);
    const r = await pay(t, '1', 'gas-1');
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toContain('treasury_insufficient_gas');
    expect(r.json.reason).toContain('0.000000000000000001 ETH missing');
    expect(r.json.reason).not.toContain('treasury_insufficient_funds');
    expect(await pendingNonce(t.treasury)).toBe(0);
  });

  test('behavior: exactly enough USDC and exactly gas × max fee passes and is mined', async () => {
    const t = await tenant('exact', 1_500_000n, 60_000n * 2n * 10n ** 9n);
    const r = await pay(t, '1.5', 'exact-1', { gas: '60000', max_fee_per_gas: String(2n * 10n ** 9n) });
    expect(r.status, r.text).toBe(200);
    expect(r.json.tx_hash).toBe(r.json.raw_transaction.hash);
    const receipt = await chain.rpc('eth_getTransactionReceipt', [r.json.tx_hash]) as { status: string };
    expect(receipt.status).toBe('0x1');
    expect(await tokenBalance(t.treasury)).toBe(0n);
  });

  test('behavior: what is signed and not yet mined counts; a concurrent burst signs only what the balance covers', async () => {
    // $1 and gas for exactly 3 transactions at the default fee bound: the ETH runs out first for
    // a burst of $0.25 payments (3 of them), then with more gas the USDC (4 in all).
    const t = await tenant('burst', 1_000_000n, 3n * DEFAULT_FEE_WEI);
    // Automining off: the signed transactions stay unmined, so only the ledger's in-flight sum stops the rest.
    await chain.rpc('evm_setAutomine', [false]);
    try {
      const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => pay(t, '0.25', `burst-${i}`)));
      const signed = burst.filter((r) => r.status === 200);
      const refused = burst.filter((r) => r.status === 403);
      expect(signed.length, burst.map((r) => r.text).join('\n')).toBe(3);
      expect(refused.length).toBe(7);
      for (const r of refused) expect(r.json.reason).toContain('treasury_insufficient_gas');
      expect(new Set(signed.map((r) => r.json.raw_transaction.nonce))).toEqual(new Set(['0', '1', '2']));
      // More gas: now the USDC binds, with $0.75 still unmined.
      await chain.rpc('hardhat_setBalance', [t.treasury, hex(10n ** 18n)]);
      const more = await Promise.all(Array.from({ length: 5 }, (_, i) => pay(t, '0.25', `more-${i}`)));
      expect(more.filter((r) => r.status === 200).length, more.map((r) => r.text).join('\n')).toBe(1);
      const usdcRefusals = more.filter((r) => r.status === 403);
      expect(usdcRefusals.length).toBe(4);
      for (const r of usdcRefusals) expect(r.json.reason).toContain('plus $1 signed and not yet mined; $0.25 missing');
    } finally {
      await chain.rpc('evm_setAutomine', [true]);
    }
    await chain.rpc('hardhat_mine', ['0x1']);
    // Everything signed is mined and paid; the treasury ends at exactly zero USDC.
    while ((await chain.rpc('eth_getTransactionCount', [t.treasury, 'latest'])) !== '0x4') {
      await chain.rpc('hardhat_mine', ['0x1']);
    }
    expect(await tokenBalance(t.treasury)).toBe(0n);
    // Mined transactions no longer count: a top-up is usable at once.
    await fundUsdc(t.treasury, 250_000n);
    const after = await pay(t, '0.25', 'after-mined');
    expect(after.status, after.text).toBe(200);
  }, 30_000);

  test('error: approving a raw transaction the treasury cannot pay is refused (treasury_insufficient_funds) and the approval stays pending; funded, it is approved and signed', async () => {
    const t = await tenant('approve-poor', 100_000n, 10n ** 18n);
    const admin = adminFor(s);
    await setPolicy(admin, t.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '0.5' });
    const pending = await pay(t, '3', 'approve-1');
    expect(pending.status, pending.text).toBe(202);
    const refused = await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE }, admin.auth).then(() => undefined, (e: unknown) => e as ConnectError);
    expect(refused?.code).toBe(Code.FailedPrecondition);
    expect(refused?.metadata.get('x-error-code')).toBe('treasury_insufficient_funds');
    expect(refused?.rawMessage).toContain('$2.9 missing');
    expect((await pay(t, '3', 'approve-1')).status).toBe(202);
    expect(await pendingNonce(t.treasury)).toBe(0);
    await fundUsdc(t.treasury, 3_000_000n);
    const approved = await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE }, admin.auth);
    expect(approved.approval?.status).toBe(ApprovalStatus.APPROVED);
    const collected = await pay(t, '3', 'approve-1');
    expect(collected.status, collected.text).toBe(200);
    expect(collected.json.raw_transaction.nonce).toBe('0');
  });

  test('error: collecting an approved raw transaction whose signing failed at the decision is checked again: 409 treasury_insufficient_funds, still approved; topped up, it signs', async () => {
    const t = await tenant('collect-poor', 5_000_000n, 10n ** 18n);
    const admin = adminFor(s);
    await setPolicy(admin, t.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '0.5' });
    const pending = await pay(t, '3', 'collect-1');
    expect(pending.status, pending.text).toBe(202);
    // The signing at the decision fails once (fault injected into the server's signer): the
    // decision stands and the payment is approved, to be signed when the agent collects it.
    const signer = s.app.deps.signer;
    const sign = signer.sign;
    signer.sign = () => Promise.reject(new Error('injected signing failure'));
    try {
      await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE }, admin.auth);
    } finally {
      signer.sign = sign;
    }
    // Meanwhile the treasury's USDC drops to $0.50 (set in the token's storage, so no transaction
    // of the treasury's own takes a nonce): too little for the $3 payment.
    const slot = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [t.treasury, 1n]));
    await chain.rpc('hardhat_setStorageAt', [USDC_84532, slot, pad(toHex(500_000n))]);
    expect(await tokenBalance(t.treasury)).toBe(500_000n);
    const nonceBefore = await pendingNonce(t.treasury);
    const refused = await pay(t, '3', 'collect-1');
    expect(refused.status, refused.text).toBe(409);
    expect(refused.json.code).toBe('treasury_insufficient_funds');
    expect(refused.json.error).toContain('$2.5 missing');
    expect(await pendingNonce(t.treasury)).toBe(nonceBefore);
    const approvals = await admin.client.listApprovals({ orgId: t.orgId }, admin.auth);
    expect(approvals.approvals.find((a) => a.id === pending.json.approval_request_id)?.status).toBe(ApprovalStatus.APPROVED);
    await fundUsdc(t.treasury, 3_000_000n);
    const collected = await pay(t, '3', 'collect-1');
    expect(collected.status, collected.text).toBe(200);
    expect(collected.json.tx_hash).toBe(collected.json.raw_transaction.hash);
  });

  test('error: a node that does not answer the balance check refuses with 503 chain_unavailable and writes nothing', async () => {
    const t = await tenant('node-down', 5_000_000n, 10n ** 18n);
    await node.close();
    let r;
    try {
      r = await pay(t, '1', 'down-1');
    } finally {
      node = await chain.listen(node.port);
    }
    expect(r.status, r.text).toBe(503);
    expect(r.json.code).toBe('chain_unavailable');
    expect(r.json.error).not.toMatch(/127\.0\.0\.1|http:/);
    // Nothing was written: the same key is a first attempt, and takes nonce 0.
    const again = await pay(t, '1', 'down-1');
    expect(again.status, again.text).toBe(200);
    expect(again.json.idempotent).toBe(false);
    expect(again.json.raw_transaction.nonce).toBe('0');
  });
});
