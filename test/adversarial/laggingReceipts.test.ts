import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { encodeFunctionData, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor } from '../helpers/admin.js';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from '../helpers/localChain.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startRpcProxy } from '../helpers/rpcProxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * "No receipt" is only the node's word. A provider behind a load balancer can report the
 * treasury's mined nonce from one backend while another has not indexed the receipt yet; read as
 * "another signer used our nonce" and acted on at once, it would release the payment's hold on the
 * cap (the row `reverted`) although it was mined: the agent could then pay the same amount again,
 * past its cap. So the organization and chain are marked conflicted at once (nothing more is signed
 * there) but the row keeps its hold until the reading has held for --replace-after-ms; when the
 * receipt shows up meanwhile, the payment is confirmed as usual.
 *
 * A real EDR chain sits behind a JSON-RPC proxy that, while `hiding`, answers null for every
 * receipt and transaction lookup (the lagging backend) and forwards everything else.
 */
const CHAIN = 84532;
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x7777777777777777777777777777777777777777';

let hiding = false;
let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let proxy: Awaited<ReturnType<typeof startRpcProxy>> | undefined;
let s: TestServer;

async function startProxy(target: string): Promise<string> {
  proxy = await startRpcProxy(target, async ({ msg, forward }) => hiding && (msg.method === 'eth_getTransactionReceipt' || msg.method === 'eth_getTransactionByHash')
    ? { jsonrpc: '2.0', id: msg.id, result: null }
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
  s = await startTestServer({ rpcUrls: new Map([[CHAIN, await startProxy(node.url)]]), submitIntervalMs: 25, logLevel: 'warn', tracking: { confirmations: 1, replaceAfterMs: 60_000 } });
  await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, deployerKey, [{ to: s.bootstrap.treasury_address as Address, amount: 100_000_000n }]);
  await setPolicy(adminFor(s), s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '0.50', thresholdUsd: '100' });
}, 30_000);
afterAll(async () => {
  await s?.close();
  await node?.close();
  await proxy?.close();
});

describe('a node that reports the nonce used but not (yet) the receipt', () => {
  test('the payment keeps its hold on the cap while the receipt is missing, and is confirmed once it shows', async () => {
    const sign = (type: 'raw_transaction' | 'eip3009', key: string) => postSign(s.url, s.bootstrap.api_key, {
      agent_id: s.bootstrap.agent_id, type, chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.50',
    }, key);
    const before = await balanceOf(RECIPIENT);
    hiding = true;
    const paid = await sign('raw_transaction', 'lagging-1');
    expect(paid.status, paid.text).toBe(200);
    const id = paid.json.transaction_id as string;
    // The transfer is mined (EDR automines); the node just does not say so.
    expect(await balanceOf(RECIPIENT)).toBe(before + 500_000n);
    // Many tracking passes see "nonce used, no receipt of ours": the pair is conflicted…
    for (const until = Date.now() + 5_000; !s.logs.some((l) => l.includes('another process uses this treasury'));) {
      if (Date.now() > until) throw new Error('the tracker never saw the nonce used');
      await new Promise((r) => setTimeout(r, 25));
    }
    await new Promise((r) => setTimeout(r, 500));
    // …but the row still holds the cap: the same $0.50 again is refused by the cap, not signed.
    expect(s.app.store.payments.get(id)!.status).toBe('signed');
    const again = await sign('eip3009', 'lagging-2');
    expect(again.status, again.text).toBe(403);
    expect(again.json.reason).toMatch(/cap/i);
    expect(again.json.signature).toBeUndefined();
    // The receipt shows up: confirmed, with its hash, and the money moved once.
    hiding = false;
    for (const until = Date.now() + 5_000; s.app.store.payments.get(id)!.submitStatus !== 'confirmed';) {
      if (Date.now() > until) throw new Error(`not confirmed: ${JSON.stringify(s.app.store.payments.get(id))}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(s.app.store.payments.get(id)!.status).toBe('signed');
    expect(await balanceOf(RECIPIENT)).toBe(before + 500_000n);
  }, 20_000);
});
