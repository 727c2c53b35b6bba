import { erc20Abi, type Address, type PublicClient } from 'viem';

/**
 * What a treasury holds on one chain, read at one block so the three numbers agree with each
 * other: its token balance (USDC, atomic units), its native gas balance (wei), and how many of its
 * transactions that block has mined (the account nonce at that block). The mined count is what
 * lets the ledger tell which of its signed transactions the balances already reflect: those with a
 * nonce below it are mined (paid or reverted), the rest are still to be paid out of these balances.
 */
export type TreasuryFunds = {
  blockNumber: bigint;
  tokenBalance: bigint;
  nativeBalanceWei: bigint;
  minedNonce: number;
};

/**
 * Reads a treasury's funds on one chain: the latest block number, then the three reads at that
 * block in parallel (two round trips, each bounded by the client's timeout). Reading at 'latest'
 * three times could straddle a block and count a transaction as unmined while the balance
 * already paid it, or the reverse, which would let a payment through that the treasury cannot
 * cover.
 */
export async function readTreasuryFunds(client: PublicClient, treasury: Address, token: Address): Promise<TreasuryFunds> {
  const blockNumber = await client.getBlockNumber({ cacheTime: 0 });
  const [tokenBalance, nativeBalanceWei, minedNonce] = await Promise.all([
    client.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [treasury], blockNumber }),
    client.getBalance({ address: treasury, blockNumber }),
    client.getTransactionCount({ address: treasury, blockNumber }),
  ]);
  return { blockNumber, tokenBalance, nativeBalanceWei, minedNonce };
}

/** Wei per ETH. */
const WEI_PER_ETH = 10n ** 18n;

/** Wei as an exact ETH decimal string without trailing zeros (1500000000000000000n → "1.5"); never a float. */
export function formatEth(wei: bigint): string {
  const sign = wei < 0n ? '-' : '';
  const abs = wei < 0n ? -wei : wei;
  const frac = (abs % WEI_PER_ETH).toString().padStart(18, '0').replace(/0+$/, '');
  return `${sign}${abs / WEI_PER_ETH}${frac ? `.${frac}` : ''}`;
}
