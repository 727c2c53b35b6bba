import type { Address } from 'viem';
import { rpcReason } from '../../chain/rpc.js';
import type { Principal } from '../../domain/types.js';
import { USDC } from '../../signing/tokens.js';
import type { AppDeps } from '../deps.js';
import { requireOrgAccess } from '../access.js';

/**
 * The treasury's funds on the chains paypolicy has an RPC endpoint for, shown to people; the check
 * before a raw transaction is signed is payments/funds.ts. Only the treasury's address is used:
 * its key is never decrypted for this.
 */

/** One chain's balances, or why they could not be read. */
export type ChainBalance = {
  chainId: number;
  /** USDC's address on the chain (the token table); null when the table has none. */
  token: Address | null;
  tokenSymbol: string;
  /** USDC in micro-units (6 decimals, so micro-USD); null when not read. */
  tokenBalanceMicros: bigint | null;
  /** Native gas balance in wei; null when not read. */
  nativeBalanceWei: bigint | null;
  /** The block the balances were read at; null when not read. */
  blockNumber: bigint | null;
  /** Why the balances were not read (node down or slow, no token); null when they were. */
  error: string | null;
};

export type TreasuryBalances = {
  orgId: string;
  /** Null before the treasury is provisioned (then no chain is read). */
  treasuryAddress: Address | null;
  /** One entry per configured chain, by chain id; empty when no RPC endpoint is configured. */
  chains: ChainBalance[];
};

/**
 * The organization's treasury balances on every chain with an RPC endpoint, read in parallel; a
 * node that is down or slow gives an error for its chain only, within the RPC timeout. Needs
 * `read` on the organization (its dashboard users, the operator); another organization's id is
 * the same 404 as an unknown one.
 */
export async function getTreasuryBalances(deps: AppDeps, principal: Principal, orgId: string): Promise<TreasuryBalances> {
  await requireOrgAccess(deps, principal, 'read', orgId);
  const address = deps.vault.address(orgId) as Address | undefined;
  if (!address) return { orgId, treasuryAddress: null, chains: [] };
  const chainIds = deps.chains.chainIds().sort((a, b) => a - b);
  const chains = await Promise.all(chainIds.map(async (chainId): Promise<ChainBalance> => {
    const token = USDC[chainId];
    const empty = { chainId, token: token?.address ?? null, tokenSymbol: token?.symbol ?? 'USDC', tokenBalanceMicros: null, nativeBalanceWei: null, blockNumber: null };
    if (!token) return { ...empty, error: `no USDC address is known for chain ${chainId}` };
    try {
      const funds = await deps.chains.treasuryFunds(chainId, address, token.address);
      return { ...empty, tokenBalanceMicros: funds.tokenBalance, nativeBalanceWei: funds.nativeBalanceWei, blockNumber: funds.blockNumber, error: null };
    } catch (err) {
      return { ...empty, error: `could not read from the node: ${rpcReason(err)}` };
    }
  }));
  return { orgId, treasuryAddress: address, chains };
}
