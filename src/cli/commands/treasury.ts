import { GetTreasuryBalancesResponseSchema, type GetTreasuryBalancesResponse } from '../../../gen/paypolicy/v1/admin_pb.js';
import { commandOutput, type Command } from '../command.js';
import { formatTable } from '../render.js';

/** The balances as text: the address, then one row per configured chain (an unreadable chain shows why, the others still show). */
function balancesText(r: GetTreasuryBalancesResponse): string {
  if (!r.treasuryAddress) return 'treasury not provisioned (paypolicy treasury provision --org ORG_ID)';
  const head = `treasury ${r.treasuryAddress}`;
  if (r.chains.length === 0) return `${head}\nno RPC endpoint configured (serve with --rpc-url CHAIN_ID=URL): balances are not read`;
  const rows = r.chains.map((c) => c.error
    ? [String(c.chainId), '', '', '', '', `error: ${c.error}`]
    : [String(c.chainId), `$${c.tokenBalanceUsd}`, c.nativeBalanceEth, c.nativeBalanceWei, String(c.blockNumber), c.tokenAddress]);
  return `${head}\n${formatTable(['CHAIN', 'USDC', 'ETH', 'WEI', 'BLOCK', 'TOKEN / ERROR'], rows)}`;
}

/** `treasury balance`; `treasury provision` lives with the organization commands. */
export const treasuryCommands: Command[] = [
  {
    group: 'treasury',
    action: 'balance',
    synopsis: '--org ORG_ID',
    summary: "Show the treasury's USDC and gas balances on every chain the server has an RPC endpoint for.",
    flags: { '--org': 'value' },
    prepare(flags) {
      const request = { orgId: flags.require('--org') };
      return async (client) => {
        const r = await client.getTreasuryBalances(request);
        return commandOutput(GetTreasuryBalancesResponseSchema, r, balancesText(r));
      };
    },
  },
];
