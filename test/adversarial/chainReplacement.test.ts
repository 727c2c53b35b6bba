import { fdatasync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { encodeFunctionData, parseTransaction, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createWalSync } from '../../src/store/walSync.js';
import { createWriteQueue } from '../../src/store/writeQueue.js';
import { adminFor } from '../helpers/admin.js';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from '../helpers/localChain.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Invariant 2 for fee bumps: a replacement is a new transaction for the same payment, so it may
 * reach the node only after its record (chain_attempts) is on disk; otherwise a crash right after
 * the broadcast would leave a mined transaction the ledger never knew. The server's WAL sync is
 * held like a slow disk while the tracker bumps a stuck transaction: the node must keep the
 * original until the sync that covers the attempt has finished. And every version of the payment
 * has the same nonce, so at most one of them can ever be mined.
 */
const CHAIN = 84532;
const RECIPIENT: Address = '0x5555555555555555555555555555555555555555';
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';

let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let s: TestServer;

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  s = await startTestServer({ rpcUrls: new Map([[CHAIN, node.url]]), submitIntervalMs: 20, logLevel: 'warn', tracking: { confirmations: 1, replaceAfterMs: 1_000 } });
  await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, deployerKey, [{ to: s.bootstrap.treasury_address as Address, amount: 100_000_000n }]);
  await setPolicy(adminFor(s), s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '1000' });
}, 30_000);
afterAll(async () => {
  await s?.close();
  await node?.close();
});

describe('fee bump durability', () => {
  test('behavior: the replacement reaches the node only after its attempt record is synced; every version has the payment\'s nonce; exactly one is mined', async () => {
    await chain.rpc('evm_setAutomine', [false]);
    const r = await postSign(s.url, s.bootstrap.api_key, {
      agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.75',
    }, 'held-bump');
    expect(r.status, r.text).toBe(200);
    const id = r.json.transaction_id as string;
    const original = r.json.tx_hash as Hex;
    expect(original).toBe(r.json.raw_transaction.hash);

    const held: Array<() => void> = [];
    const store = s.app.store;
    const writes = store.writes;
    store.writes = createWriteQueue(store.db, createWalSync(join(s.dataDir, 'paypolicy.db-wal'), (fd, done) => {
      held.push(() => fdatasync(fd, done));
    }), store.tx);
    const knows = async (h: string) => (await chain.rpc('eth_getTransactionByHash', [h])) !== null;
    // Syncs asked for before the bump is committed (other writes of the server) are let through;
    // from the moment the bump is committed (visible to this process) every sync is held.
    let n = 0;
    const release = () => { while (n < held.length) held[n++]!(); };
    const until = Date.now() + 10_000;
    while (store.payments.attempts(id).length === 0) {
      if (Date.now() > until) throw new Error('no fee bump was recorded');
      release();
      await new Promise((res) => setTimeout(res, 5));
    }
    const [bump] = store.payments.attempts(id);
    // Many tracker passes (every 20 ms) while the sync is held: the node still has only the original.
    await new Promise((res) => setTimeout(res, 400));
    expect(await knows(original)).toBe(true);
    expect(await knows(bump!.hash)).toBe(false);

    // The disk catches up: the replacement is broadcast and takes the original's place.
    while (!(await knows(bump!.hash))) {
      release();
      await new Promise((res) => setTimeout(res, 10));
    }
    release();
    store.writes = writes;
    expect(await knows(original)).toBe(false);

    const versions = [r.json.raw_transaction.serialized as Hex, ...store.payments.attempts(id).map((a) => a.serialized as Hex)].map((x) => parseTransaction(x));
    expect(new Set(versions.map((v) => v.nonce))).toEqual(new Set([Number(r.json.raw_transaction.nonce)]));
    const before = BigInt(await chain.rpc('eth_call', [{ to: USDC, data: encodeFunctionData({ abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [RECIPIENT] }) }, 'latest']) as string);
    await chain.rpc('hardhat_mine', ['0x1']);
    await chain.rpc('evm_setAutomine', [true]);
    const allVersions = [original, ...store.payments.attempts(id).map((a) => a.hash)];
    const mined = (await Promise.all(allVersions.map((h) => chain.rpc('eth_getTransactionReceipt', [h])))).filter((x) => x !== null);
    expect(mined).toHaveLength(1);
    const after = BigInt(await chain.rpc('eth_call', [{ to: USDC, data: encodeFunctionData({ abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [RECIPIENT] }) }, 'latest']) as string);
    expect(after - before).toBe(750_000n);
    while (store.payments.get(id)?.submitStatus !== 'confirmed') await new Promise((res) => setTimeout(res, 20));
    expect(allVersions).toContain(store.payments.get(id)!.txHash);
  }, 30_000);
});
