import { afterAll, beforeAll, expect, test } from 'vitest';
import { type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createLocalChain, installMiniUsdc, type LocalChain } from '../helpers/localChain.js';
import { createAgent } from '../helpers/admin.js';
import { listAllTransactions, setPolicy, usdToMicros, type SignBody } from '../helpers/payments.js';
import { postSignRetrying, startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * A 500-way cap race over three replicas with mixed types,
 * EIP-3009 authorizations and raw transactions on a real EDR chain: the cap is exact and the raw
 * transactions' nonces are unique and gap-free, whichever replica reserved them.
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
  c = await startCluster({ replicas: 3, args: ['--rpc-url', `${CHAIN}=${node.url}`, '--max-in-flight', '1000', '--max-sign-queue', '1000', '--max-queue-ms', '60000'] });
  const treasury = c.bootstrap.treasury_address as Address;
  await chain.rpc('hardhat_setBalance', [treasury, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC_84532, deployerKey, [{ to: treasury, amount: 1_000_000_000n }]);
}, 120_000);
afterAll(async () => {
  await c?.close();
  await node?.close();
}, 60_000);

test('500 mixed payments over three replicas: the cap exact, raw nonces unique and gap-free', async () => {
  const agentId = await createAgent(c.admin(0), c.bootstrap.org_id, 'mixed');
  await setPolicy(c.admin(1), agentId, { allowlist: [RECIPIENT], capUsd: '10.00', thresholdUsd: '5' });
  const body = (i: number): SignBody => i % 2 === 0
    ? { agent_id: agentId, type: 'eip3009', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.03' }
    : { agent_id: agentId, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.03' };
  // A 503 (out of pooled connections on a loaded machine) wrote nothing: sent again as agents do.
  const urls = c.replicas.map((r) => r.url);
  const answers = await Promise.all(Array.from({ length: 500 }, (_, i) => postSignRetrying(urls, i, c.bootstrap.api_key, body(i), `mixed-${i}`)));
  // A payment whose reservation was made but whose settling write then hit the database limit
  // ends `failed` (nothing paid, hold and nonce released) and its repeat says signing_failed: a
  // legitimate outcome on a loaded machine, which also frees budget for none of the others (they
  // were decided at once).
  const failed = answers.filter((a) => a.status === 409 && a.json.code === 'signing_failed');
  expect(answers.filter((a) => a.status !== 200 && a.status !== 403 && !failed.includes(a)).map((a) => a.text).slice(0, 3)).toEqual([]);
  const ok = answers.filter((a) => a.status === 200);
  expect(ok.length).toBeLessThanOrEqual(333);
  if (failed.length === 0) expect(ok).toHaveLength(333);
  const raw = ok.filter((a) => a.json.raw_transaction);
  expect(raw.length).toBeGreaterThan(0);
  expect(ok.length - raw.length).toBeGreaterThan(0);
  const nonces = raw.map((a) => Number(a.json.raw_transaction.nonce)).sort((x, y) => x - y);
  expect(new Set(nonces).size).toBe(nonces.length);
  // Gap-free when no reservation failed (a handed-back nonce waits for the next raw payment: README, known limits).
  if (failed.length === 0) expect(nonces).toEqual(Array.from({ length: raw.length }, (_, i) => i));
  const rows = await listAllTransactions(c.admin(2), c.bootstrap.org_id, agentId);
  const signed = rows.filter((t) => t.status === 'signed');
  expect(rows.filter((t) => t.status === 'signing' || t.status === 'approved')).toEqual([]);
  expect(signed).toHaveLength(ok.length);
  const committed = signed.reduce((sum, t) => sum + usdToMicros(t.amountUsd), 0n);
  expect(committed).toBe(BigInt(ok.length) * 30_000n);
  expect(committed <= 10_000_000n).toBe(true);
}, 180_000);
