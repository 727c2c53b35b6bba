import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { encodeFunctionData, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor, createAgent } from '../helpers/admin.js';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from '../helpers/localChain.js';
import { postSign } from '../helpers/payments.js';
import { startRpcProxy } from '../helpers/rpcProxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A node whose receipts are malformed or belong to another transaction. A receipt decides a
 * payment's fate: `reverted` releases its hold on the spend cap, so the agent may pay that amount
 * again. Taking a receipt without a valid status, or one for a hash paypolicy did not ask about,
 * as "reverted" would let an agent with a $0.50 cap move $1.00 on chain. Only a receipt for the
 * very hash asked, with status exactly 0x1 or 0x0 and sane quantities, decides anything; anything
 * else decides nothing (the row keeps its hold and is tracked again).
 *
 * The chain is real (EDR); between it and paypolicy sits a JSON-RPC proxy that forwards every call
 * and rewrites the receipts the test chooses.
 */
const CHAIN = 84532;
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x6666666666666666666666666666666666666666';

type Receipt = Record<string, unknown> & { transactionHash: Hex };
let rewrite: ((receipt: Receipt) => Receipt) | undefined;
let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let proxy: Awaited<ReturnType<typeof startRpcProxy>> | undefined;
let s: TestServer;

/** Forwards JSON-RPC to the chain; a receipt in an answer goes through `rewrite` when set. */
async function startProxy(target: string): Promise<string> {
  proxy = await startRpcProxy(target, async ({ msg, forward }) => {
    const answer = await forward() as { result?: unknown };
    if (msg.method === 'eth_getTransactionReceipt' && answer.result && rewrite) answer.result = rewrite(answer.result as Receipt);
    return answer;
  });
  return proxy.url;
}

const balanceOf = async (who: Address) => BigInt(await chain.rpc('eth_call', [{
  to: USDC, data: encodeFunctionData({ abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [who] }),
}, 'latest']) as string);

async function waitFor(what: string, fn: () => boolean, timeoutMs = 10_000): Promise<void> {
  for (const until = Date.now() + timeoutMs; !fn();) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  s = await startTestServer({ rpcUrls: new Map([[CHAIN, await startProxy(node.url)]]), submitIntervalMs: 25, logLevel: 'warn', tracking: { confirmations: 1, replaceAfterMs: 60_000 } });
  await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, deployerKey, [{ to: s.bootstrap.treasury_address as Address, amount: 100_000_000n }]);
}, 30_000);
afterAll(async () => {
  await s?.close();
  await node?.close();
  await proxy?.close();
});

const row = (id: string) => s.app.store.payments.get(id)!;

describe('receipts from a hostile node decide nothing', () => {
  test.each([
    ['a receipt without a status', (r: Receipt) => { const { status: _status, ...rest } = r; return rest as Receipt; }],
    ['a receipt with a status that is neither 0x1 nor 0x0', (r: Receipt) => ({ ...r, status: '0x2' })],
    ['a failed receipt of another transaction', (r: Receipt) => ({ ...r, status: '0x0', transactionHash: `0x${'ab'.repeat(32)}` as Hex })],
    ['a receipt with absurd gas figures', (r: Receipt) => ({ ...r, gasUsed: `0x${'f'.repeat(64)}`, effectiveGasPrice: `0x${'f'.repeat(64)}` })],
  ])('error: %s: the payment is not reverted, the cap keeps its hold, and once the node answers honestly it is confirmed with the true fee', async (name, bad) => {
    const admin = adminFor(s);
    const agentId = await createAgent(admin, s.bootstrap.org_id, `receipts-${name.replace(/\W+/g, '-')}`);
    await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '0.50', approvalThresholdUsd: '1000' }, admin.auth);
    const pay = (key: string) => postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.50' }, key);
    const before = await balanceOf(RECIPIENT);

    rewrite = bad;
    const first = await pay(`${name.replace(/\W+/g, '-')}-1`);
    expect(first.status, first.text).toBe(200);
    const id = first.json.transaction_id as string;
    const hash = first.json.tx_hash as Hex;
    expect((await chain.rpc('eth_getTransactionReceipt', [hash]) as { status: Hex }).status).toBe('0x1');
    expect(await balanceOf(RECIPIENT)).toBe(before + 500_000n);
    // Several tracking passes see the hostile receipt.
    await new Promise((r) => setTimeout(r, 400));
    expect(row(id).status, row(id).reason).toBe('signed');
    expect(row(id).submitStatus).toBe('submitted');
    const again = await pay(`${name.replace(/\W+/g, '-')}-2`);
    expect(again.status, again.text).toBe(403);
    expect(again.json.reason).toMatch(/Spend cap/);
    expect(await balanceOf(RECIPIENT)).toBe(before + 500_000n);

    rewrite = undefined;
    await waitFor('confirmed', () => row(id).submitStatus === 'confirmed');
    const receipt = await chain.rpc('eth_getTransactionReceipt', [hash]) as { gasUsed: Hex; effectiveGasPrice: Hex };
    const stored = s.app.store.db.prepare('SELECT network_fee_wei AS fee FROM transactions WHERE id = ?').get(id) as { fee: string };
    expect(stored.fee).toBe((BigInt(receipt.gasUsed) * BigInt(receipt.effectiveGasPrice)).toString());
  });
});
