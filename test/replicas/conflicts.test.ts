import { afterAll, beforeAll, expect, test } from 'vitest';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createLocalChain, installMiniUsdc, type LocalChain } from '../helpers/localChain.js';
import { listAllTransactions, postSign, setPolicy } from '../helpers/payments.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * Another signer uses the treasury's nonces (a chain conflict, README "On-chain submission"): the
 * replica whose tracker sees it refuses raw transactions there, and so must every other replica of
 * the database (store/pg/conflicts.ts), until a restart after the operator stopped that signer.
 */

const CHAIN = 84532;
const USDC_84532: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x2222222222222222222222222222222222222222';

let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let c: Cluster;
let treasury: Address;

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  c = await startCluster({ replicas: 3, args: ['--rpc-url', `${CHAIN}=${node.url}`, '--replace-after-ms', '1000'] });
  treasury = c.bootstrap.treasury_address as Address;
  await chain.rpc('hardhat_setBalance', [treasury, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC_84532, deployerKey, [{ to: treasury, amount: 1_000_000_000n }]);
  await setPolicy(c.admin(0), c.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '1000' });
}, 120_000);
afterAll(async () => {
  await c?.close();
  await node?.close();
}, 60_000);

const sign = (replica: number, key: string) => postSign(c.replicas[replica]!.url, c.bootstrap.api_key, {
  agent_id: c.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.25',
}, key);

async function until<T>(ms: number, fn: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('a chain conflict seen by one replica stops raw transactions on every replica, until a restart clears it', async () => {
  await chain.rpc('evm_setAutomine', [false]);
  const r = await sign(0, 'taken-nonce');
  expect(r.status, r.text).toBe(200);
  // Another signer takes the same nonce with higher fees; the node mines its transaction.
  await chain.rpc('hardhat_impersonateAccount', [treasury]);
  await chain.rpc('eth_sendTransaction', [{
    from: treasury, to: treasury, data: '0x', gas: '0x30000', maxFeePerGas: `0x${(10n ** 11n).toString(16)}`,
    maxPriorityFeePerGas: `0x${(10n ** 10n).toString(16)}`, nonce: `0x${Number(r.json.raw_transaction.nonce).toString(16)}`,
  }]) as Hex;
  await chain.rpc('hardhat_stopImpersonatingAccount', [treasury]);
  await chain.rpc('hardhat_mine', ['0x1']);
  await chain.rpc('evm_setAutomine', [true]);

  // Whichever replica's tracker sees it, every replica refuses within a few seconds.
  for (const i of [0, 1, 2]) {
    const refused = await until(20_000, async () => {
      const a = await sign(i, `while-conflicted-${i}-${Date.now()}`);
      return a.status === 409 ? a : undefined;
    });
    expect(refused.json.code).toBe('treasury_conflict');
  }

  // The taken row settles (reverted once the reading held for --replace-after-ms); then the
  // operator, having stopped the other signer, restarts one replica: the conflict is cleared on all.
  await until(30_000, async () => {
    const rows = await listAllTransactions(c.admin(0), c.bootstrap.org_id, c.bootstrap.agent_id);
    return rows.find((t) => t.id === r.json.transaction_id && t.status === 'reverted');
  });
  await c.kill(1);
  await c.start(1);
  for (const i of [0, 2]) {
    const ok = await until(10_000, async () => {
      const a = await sign(i, `after-restart-${i}-${Date.now()}`);
      return a.status === 200 ? a : undefined;
    });
    expect(ok.json.raw_transaction).toBeDefined();
  }
}, 120_000);
