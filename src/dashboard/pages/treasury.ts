import type { ChainBalance, TreasuryBalances } from '../../app/organizations/treasury.js';
import { formatEth } from '../../chain/balances.js';
import { checksum, usd } from '../format.js';
import { html } from '../html.js';
import { tableWrap } from '../layout.js';

/** One chain's row: USDC in dollars, gas in ETH with the exact wei beside it, or why it could not be read. */
function chainRow(c: ChainBalance) {
  if (c.error !== null || c.tokenBalanceMicros === null || c.nativeBalanceWei === null) {
    return html`<tr><th scope="row">${c.chainId}</th><td colspan="3">${c.error ?? 'no answer'}</td></tr>`;
  }
  return html`<tr><th scope="row">${c.chainId}</th><td>${usd(c.tokenBalanceMicros)}</td><td>${formatEth(c.nativeBalanceWei)} ETH <span class="small muted">(${c.nativeBalanceWei.toString()} wei)</span></td><td>${c.blockNumber?.toString() ?? ''}</td></tr>`;
}

/**
 * The treasury's balances on the Spend page: what raw transactions are paid from (USDC, and ETH
 * for gas), read from each configured chain's node when the page is rendered. Without an RPC
 * endpoint nothing is read, and the panel says so.
 */
export function treasuryPanel(b: TreasuryBalances) {
  const body = b.treasuryAddress === null
    ? html`<p class="empty">The organization's treasury is not provisioned yet.</p>`
    : html`<p class="small">Treasury <code>${checksum(b.treasuryAddress)}</code></p>
${b.chains.length === 0
  ? html`<p class="empty">No RPC endpoint is configured (the server's <code>--rpc-url CHAIN_ID=URL</code>), so balances are not read and raw transactions are not submitted or checked against them.</p>`
  : tableWrap('Treasury balances', html`<table>
<thead><tr><th scope="col">Chain</th><th scope="col">USDC</th><th scope="col">Gas</th><th scope="col">Block</th></tr></thead>
<tbody>${b.chains.map(chainRow)}</tbody>
</table>`)}
<p class="small muted">A raw transaction is refused when these balances cannot pay it together with those signed and not yet mined.</p>`;
  return html`<section class="panel" aria-labelledby="treasury-balances"><h2 id="treasury-balances">Treasury balances</h2>
${body}</section>`;
}
