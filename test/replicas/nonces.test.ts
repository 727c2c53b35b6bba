import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPublicClient, http, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from '../helpers/localChain.js';
import { listAllTransactions, setPolicy } from '../helpers/payments.js';
import { postSignRetrying, startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * Raw-transaction nonces across three replicas on one PostgreSQL, submitting to one real EDR chain
 * on loopback: every nonce of the treasury on the chain is handed out once, with no gap, whichever
 * replica reserved it, and every payment is mined (the background submitter and tracker run on
 * one replica at a time, store/pg/cluster.ts).
 */

const CHAIN = 84532;
const USDC_84532: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x2222222222222222222222222222222222222222';

let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let c: Cluster;

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  c = await startCluster({ replicas: 3, args: ['--rpc-url', `${CHAIN}=${node.url}`, '--max-in-flight', '1000', '--max-queue-ms', '30000'] });
  const treasury = c.bootstrap.treasury_address as Address;
  await chain.rpc('hardhat_setBalance', [treasury, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC_84532, deployerKey, [{ to: treasury, amount: 1_000_000_000n }]);
  await setPolicy(c.admin(0), c.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '1000' });
}, 120_000);
afterAll(async () => {
  await c?.close();
  await node?.close();
}, 60_000);

test('nonces are unique and gap-free per (treasury, chain) whichever replica reserves them, and every payment is mined', async () => {
  const N = 90;
  // A 503 (database_unavailable on a loaded machine) wrote nothing: repeated as agents do.
  const urls = c.replicas.map((r) => r.url);
  const answers = await Promise.all(Array.from({ length: N }, (_, i) => postSignRetrying(urls, i, c.bootstrap.api_key, {
    agent_id: c.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.25',
  }, `nonce-${i}`)));
  expect(answers.filter((a) => a.status !== 200).map((a) => a.text).slice(0, 3)).toEqual([]);
  const nonces = answers.map((a) => Number(a.json.raw_transaction.nonce)).sort((x, y) => x - y);
  expect(nonces).toEqual(Array.from({ length: N }, (_, i) => i));

  // Everything reaches the chain: the treasury's mined nonce count is N and each hash has a successful receipt.
  const pc = createPublicClient({ transport: http(node.url, { retryCount: 0 }), pollingInterval: 50 });
  const treasury = c.bootstrap.treasury_address as Address;
  const until = Date.now() + 60_000;
  while ((await pc.getTransactionCount({ address: treasury })) < N && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
  expect(await pc.getTransactionCount({ address: treasury })).toBe(N);
  for (const a of answers.filter((_, i) => i % 9 === 0)) {
    const receipt = await pc.getTransactionReceipt({ hash: a.json.raw_transaction.hash as Hex });
    expect(receipt.status).toBe('success');
  }
  expect(await pc.readContract({ address: USDC_84532, abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [RECIPIENT] })).toBe(BigInt(N) * 250_000n);
  // The ledger agrees: N signed rows, one per key.
  const rows = await listAllTransactions(c.admin(2), c.bootstrap.org_id, c.bootstrap.agent_id);
  expect(rows.filter((t) => t.status === 'signed')).toHaveLength(N);
}, 180_000);
