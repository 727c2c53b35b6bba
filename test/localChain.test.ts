import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, encodeFunctionData, http, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from './helpers/localChain.js';

// Smoke test of the EDR helper, so an EDR upgrade that changes its config shape fails here first.
const TOKEN = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';

describe('local EDR chain over HTTP', () => {
  let chain: LocalChain;
  let node: Awaited<ReturnType<LocalChain['listen']>>;
  const deployerKey = generatePrivateKey();
  const payerKey = generatePrivateKey();
  const payer = privateKeyToAccount(payerKey);
  const payee = privateKeyToAccount(generatePrivateKey()).address;

  beforeAll(async () => {
    chain = await createLocalChain({ chainId: 84532, accounts: [privateKeyToAccount(deployerKey), payer].map((a) => ({ address: a.address, balance: 10n ** 20n })) });
    await installMiniUsdc(chain, TOKEN, deployerKey, [{ to: payer.address, amount: 5_000_000n }]);
    node = await chain.listen();
  });
  afterAll(async () => node?.close());

  it('mines a signed EIP-1559 transfer of MiniUSDC sent with eth_sendRawTransaction', async () => {
    const pc = createPublicClient({ transport: http(node.url, { retryCount: 0 }), pollingInterval: 20 });
    expect(await pc.getChainId()).toBe(84532);
    const raw: Hex = await payer.signTransaction({
      type: 'eip1559', chainId: 84532, to: TOKEN, gas: 100_000n, nonce: await pc.getTransactionCount({ address: payer.address }),
      maxPriorityFeePerGas: 1n, maxFeePerGas: 10_000_000_000n,
      data: encodeFunctionData({ abi: MINI_USDC_ABI, functionName: 'mint', args: [payee, 1n] }),
    });
    // mint is the minter's only: mined, reverted (bailOnTransactionFailure false, like a real node).
    const reverted = await pc.waitForTransactionReceipt({ hash: await pc.sendRawTransaction({ serializedTransaction: raw }) });
    expect(reverted.status).toBe('reverted');
    const transfer = await payer.signTransaction({
      type: 'eip1559', chainId: 84532, to: TOKEN, gas: 100_000n, nonce: await pc.getTransactionCount({ address: payer.address }),
      maxPriorityFeePerGas: 1n, maxFeePerGas: 10_000_000_000n,
      data: encodeFunctionData({ abi: [{ type: 'function', name: 'transfer', stateMutability: 'nonpayable', inputs: [{ name: 'to', type: 'address' }, { name: 'value', type: 'uint256' }], outputs: [{ name: '', type: 'bool' }] }], functionName: 'transfer', args: [payee, 250_000n] }),
    });
    const receipt = await pc.waitForTransactionReceipt({ hash: await pc.sendRawTransaction({ serializedTransaction: transfer }) });
    expect(receipt.status).toBe('success');
    expect(await pc.readContract({ address: TOKEN, abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [payee] })).toBe(250_000n);
    expect(await pc.readContract({ address: TOKEN, abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [payer.address] })).toBe(4_750_000n);
  });
});
