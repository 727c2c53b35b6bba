import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { encodeAbiParameters, encodeFunctionData, keccak256, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor, createTenant, type Tenant } from '../helpers/admin.js';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from '../helpers/localChain.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startRpcProxy } from '../helpers/rpcProxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * One organization's stuck transaction must not hold back another organization's on the same
 * chain. The background submitter walks the chain's waiting rows in nonce order and stops at the
 * first one the node did not take; that stop is right for the same treasury (its later nonces
 * cannot be mined first) but another treasury's nonces are unrelated: organization A's treasury
 * running out of gas must not leave organization B's signed and acknowledged payments unsent for
 * as long as A's stays stuck.
 *
 * A real EDR chain behind a proxy that, while `refusing`, answers every eth_sendRawTransaction
 * with an error (a node briefly unable to take transactions), so both payments wait for the
 * background submitter.
 */
const CHAIN = 84532;
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x2222222222222222222222222222222222222222';

let refusing = false;
let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let proxy: Awaited<ReturnType<typeof startRpcProxy>> | undefined;
let s: TestServer;
let b: Tenant;
let treasuryB: Address;

/** A row's submission state, through the store either backend serves (the pg project runs this file too). */
const statusOf = async (id: string) => (await s.app.deps.store.payments.get(id))!.submitStatus;

async function startProxy(target: string): Promise<string> {
  proxy = await startRpcProxy(target, async ({ msg, forward }) => refusing && msg.method === 'eth_sendRawTransaction'
    ? { jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: 'txpool is full' } }
    : forward());
  return proxy.url;
}

const balanceOf = async (who: Address) => BigInt(await chain.rpc('eth_call', [{
  to: USDC, data: encodeFunctionData({ abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [who] }),
}, 'latest']) as string);

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  // The 110-payment burst below is about submission order, not admission: on a loaded machine the
  // default 1 s queue wait shed one of them (503) in CI, so the wait is not what is measured here.
  s = await startTestServer({ rpcUrls: new Map([[CHAIN, await startProxy(node.url)]]), submitIntervalMs: 40, logLevel: 'warn', limits: { maxQueueMs: 60_000 } });
  const admin = adminFor(s);
  b = await createTenant(admin, 'tenant-b');
  treasuryB = (await admin.client.provisionTreasury({ orgId: b.orgId }, admin.auth)).treasuryAddress as Address;
  const treasuryA = s.bootstrap.treasury_address as Address;
  for (const t of [treasuryA, treasuryB]) await chain.rpc('hardhat_setBalance', [t, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, deployerKey, [{ to: treasuryA, amount: 100_000_000n }, { to: treasuryB, amount: 100_000_000n }]);
  await setPolicy(admin, s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '100' });
  await setPolicy(admin, b.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '100' });
}, 30_000);
afterAll(async () => {
  await s?.close();
  await node?.close();
  await proxy?.close();
});

describe('background submission is per treasury', () => {
  test('error: organization A\'s transaction the node keeps refusing does not hold back organization B\'s on the same chain', async () => {
    const payA = (key: string) => postSign(s.url, s.bootstrap.api_key, { agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.10' }, key);
    const payB = (key: string) => postSign(s.url, b.apiKey, { agent_id: b.agentId, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.20' }, key);
    // B's first payment lands, so B's next nonce (1) sorts after A's first (0).
    const first = await payB('b-first');
    expect(first.status, first.text).toBe(200);
    expect(first.json.tx_hash).not.toBeNull();

    refusing = true;
    const a = await payA('a-stuck');
    const b1 = await payB('b-second');
    expect(a.status, a.text).toBe(200);
    expect(b1.status, b1.text).toBe(200);
    expect([a.json.tx_hash, b1.json.tx_hash]).toEqual([null, null]);
    expect(Number(a.json.raw_transaction.nonce)).toBeLessThan(Number(b1.json.raw_transaction.nonce));
    // A's treasury loses its gas money: the node now refuses A's transaction (not for good: it
    // may be topped up), and takes everything else.
    await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x0']);
    const before = await balanceOf(RECIPIENT);
    refusing = false;

    for (const until = Date.now() + 5_000; (await statusOf(b1.json.transaction_id)) === 'pending';) {
      if (Date.now() > until) throw new Error('organization B\'s payment was never broadcast');
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(await balanceOf(RECIPIENT)).toBe(before + 200_000n);
    expect(await statusOf(a.json.transaction_id)).toBe('pending');
  });

  test('error: a newer organization with a batch\'s worth of stuck rows at low nonces does not starve an older organization\'s row at a high nonce', async () => {
    const admin = adminFor(s);
    const c = await createTenant(admin, 'tenant-c');
    const treasuryC = (await admin.client.provisionTreasury({ orgId: c.orgId }, admin.auth)).treasuryAddress as Address;
    await chain.rpc('hardhat_setBalance', [treasuryC, '0x56bc75e2d63100000']);
    await setPolicy(admin, c.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '100' });
    // C's treasury has a long history on this chain: its next nonce is 5000.
    await chain.rpc('hardhat_setNonce', [treasuryC, '0x1388']);
    await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
    // A (nonces from 2 up) gets more waiting rows than one batch of the submitter, all stuck.
    refusing = true;
    const stuck = await Promise.all(Array.from({ length: 110 }, (_, i) => postSign(s.url, s.bootstrap.api_key, {
      agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.01',
    }, `a-many-${i}`)));
    expect(stuck.map((r) => r.status)).toEqual(stuck.map(() => 200));
    // C's USDC, set in the token's storage.
    await chain.rpc('hardhat_setStorageAt', [USDC, keccakSlot(treasuryC), `0x${(100_000_000n).toString(16).padStart(64, '0')}`]);
    const cPay = await postSign(s.url, c.apiKey, { agent_id: c.agentId, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.30' }, 'c-high-nonce');
    expect(cPay.status, cPay.text).toBe(200);
    expect(cPay.json.raw_transaction.nonce).toBe('5000');
    await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x0']);
    const before = await balanceOf(RECIPIENT);
    refusing = false;
    for (const until = Date.now() + 5_000; (await statusOf(cPay.json.transaction_id)) === 'pending';) {
      if (Date.now() > until) throw new Error('organization C\'s payment was never broadcast');
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(await balanceOf(RECIPIENT)).toBe(before + 300_000n);
  }, 30_000);
});

/** MiniUSDC's balance slot of `who` (balances are the mapping at slot 1). */
function keccakSlot(who: Address): Hex {
  return keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [who, 1n]));
}
