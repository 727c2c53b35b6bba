import type { Address } from 'viem';

/** A USD stablecoin the service can sign for directly, with its EIP-712 domain facts. */
export type StableToken = {
  chainId: number;
  symbol: string;
  address: Address;
  /** EIP-712 domain name; differs per chain even for the same token ("USD Coin" vs "USDC"). */
  name: string;
  version: string;
  decimals: number;
};

/**
 * USDC per chain for the direct types. Addresses and domain names are the issuers' published
 * deployments (see shared/protocols/x402.md §9); a wrong name only shows up as a bad signature.
 */
export const USDC: Readonly<Record<number, StableToken>> = {
  8453: { chainId: 8453, symbol: 'USDC', address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', name: 'USD Coin', version: '2', decimals: 6 },
  84532: { chainId: 84532, symbol: 'USDC', address: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', name: 'USDC', version: '2', decimals: 6 },
};

/** Canonical Uniswap Permit2, deployed at the same address on every EVM chain. */
export const PERMIT2_ADDRESS: Address = '0x000000000022D473030F116dDEE9F6B43aC78BA3';

/** x402's exact-scheme Permit2 proxy: the spender that can only pay the witnessed `to`. */
export const X402_EXACT_PERMIT2_PROXY: Address = '0x402085c248EeA27D92E8b30b2C58ed07f9E20001';
