import type { MessageInitShape } from '@bufbuild/protobuf';
import type { GetTreasuryBalancesResponseSchema } from '../../gen/paypolicy/v1/admin_pb.js';
import type { TreasuryBalances } from '../app/organizations/treasury.js';
import { formatEth } from '../chain/balances.js';
import { formatUsd } from '../domain/money.js';

/**
 * Treasury balances on the wire: integers as decimal strings (uint256 does not fit a proto
 * integer), each beside its exact human form (USD from USDC's 6 decimals, ETH from wei); a value
 * not read is empty, with `error` saying why.
 */
export function treasuryBalancesToProto(b: TreasuryBalances): MessageInitShape<typeof GetTreasuryBalancesResponseSchema> {
  return {
    treasuryAddress: b.treasuryAddress ?? '',
    chains: b.chains.map((c) => ({
      chainId: c.chainId,
      tokenAddress: c.token ?? '',
      tokenSymbol: c.tokenSymbol,
      tokenBalanceMicros: c.tokenBalanceMicros?.toString() ?? '',
      tokenBalanceUsd: c.tokenBalanceMicros === null ? '' : formatUsd(c.tokenBalanceMicros),
      nativeBalanceWei: c.nativeBalanceWei?.toString() ?? '',
      nativeBalanceEth: c.nativeBalanceWei === null ? '' : formatEth(c.nativeBalanceWei),
      blockNumber: c.blockNumber ?? 0n,
      error: c.error ?? '',
    })),
  };
}
