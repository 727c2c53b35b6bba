import type { Address } from 'viem';
import type { TreasuryFunds } from '../../chain/balances.js';
import { formatEth } from '../../chain/balances.js';
import { rpcReason, type ChainRpc } from '../../chain/rpc.js';
import { DomainError } from '../../domain/errors.js';
import { formatUsd } from '../../domain/money.js';
import { maxNetworkFeeWei, type NetworkFee } from '../../domain/networkFee.js';
import { deny, type Verdict } from '../../domain/policy.js';
import { USDC } from '../../signing/tokens.js';
import type { AppDeps } from '../deps.js';
import { storedNetworkFee } from './recheck.js';

/**
 * Whether the treasury can pay a raw transaction, checked before it is signed: its balances are
 * read outside any write (readFundsForSigning), then compared inside the write that reserves its
 * nonce (treasuryFundsVerdict). Only the treasury's address is used: its key is never decrypted
 * for this.
 */

/**
 * Funds read before a raw transaction's reserving write: undefined when its chain has no endpoint
 * (nothing is submitted there, so nothing is checked), else the reading or why there is none.
 */
export type FundsReading = { ok: true; funds: TreasuryFunds } | { ok: false; reason: string };

/** Balance reads under way per RPC registry and (chain, treasury): concurrent raw payments share one. */
const readsUnderWay = new WeakMap<ChainRpc, Map<string, Promise<FundsReading>>>();

/**
 * Reads the treasury's funds for a raw transaction on `chainId`, outside any write: the node's
 * answer must not hold the write queue. Runs beside the nonce-floor read, so it adds no round
 * trip of its own to the payment. A payment that arrives while a read for the same treasury and
 * chain is under way shares it instead of asking the node again (a node that answers one call at
 * a time otherwise bounds raw payments at a quarter of its call rate). That is no weaker: a reading
 * is a consistent snapshot at one block, and treasuryFundsVerdict counts every transaction that
 * block has not mined, whenever it was signed; only money arriving after the read is missed,
 * which errs towards refusing. Nothing is kept once the read has settled.
 */
export function readFundsForSigning(deps: AppDeps, chainId: number, treasury: Address): Promise<FundsReading | undefined> {
  const token = USDC[chainId];
  if (!deps.chains.has(chainId) || !token) return Promise.resolve(undefined);
  let reads = readsUnderWay.get(deps.chains);
  if (!reads) readsUnderWay.set(deps.chains, reads = new Map());
  const key = `${chainId}\u0000${treasury.toLowerCase()}`;
  const shared = reads.get(key);
  if (shared) return shared;
  const read = deps.chains.treasuryFunds(chainId, treasury, token.address)
    .then((funds): FundsReading => ({ ok: true, funds }), (err: unknown): FundsReading => ({ ok: false, reason: rpcReason(err) }));
  reads.set(key, read);
  void read.then(() => reads.delete(key));
  return read;
}

/**
 * Inside the serialized write that would reserve a raw transaction's nonce: an allowed verdict
 * becomes a denial when the treasury cannot pay it together with everything it has signed (or is
 * signing) on that chain that the balance's block has not mined. Because every reservation is in
 * this same serialized write and counts the ones before it, concurrent payments that each fit the
 * balance alone cannot together exceed it.
 *
 * A node that did not answer fails closed: 503 `chain_unavailable` and nothing is written, so the
 * same Idempotency-Key is a first attempt later. Signing blind could hand out a transaction the
 * treasury cannot pay, which would either revert on chain (gas spent) or be refused by the node
 * and hold back every later nonce of the treasury on that chain.
 */
export async function treasuryFundsVerdict(
  deps: AppDeps, orgId: string, chainId: number, reading: FundsReading | undefined,
  payment: { amountMicros: bigint; networkFee: NetworkFee | null }, verdict: Verdict,
): Promise<Verdict> {
  if (verdict.outcome !== 'allowed' || reading === undefined) return verdict;
  if (!reading.ok) {
    throw new DomainError('treasury_unavailable', `The treasury balances could not be read from the RPC node for chain ${chainId} (${reading.reason}); nothing was signed, retry shortly`, {
      code: 'chain_unavailable',
    });
  }
  const { funds } = reading;
  let unminedMicros = 0n;
  let unminedFeeWei = 0n;
  for (const row of await deps.store.treasuryFunds.unminedRaw(orgId, chainId, funds.minedNonce)) {
    unminedMicros += row.amountMicros;
    const fee = storedNetworkFee(row.request);
    if (fee) unminedFeeWei += maxNetworkFeeWei(fee);
  }
  const shortfall = treasuryShortfall(chainId, funds, { unminedMicros, unminedFeeWei }, payment);
  return shortfall ? deny(shortfall.rule, shortfall.reason, { scope: 'organization' }) : verdict;
}

/**
 * Why the treasury cannot pay a payment on top of what is not yet mined, in USD and ETH, or null
 * when it can. Token first, then gas; both when both are short (the rule names the first). The
 * codes in parentheses are stable (docs/onchain.md "Treasury balances").
 */
function treasuryShortfall(
  chainId: number, funds: Pick<TreasuryFunds, 'tokenBalance' | 'nativeBalanceWei'>,
  unmined: { unminedMicros: bigint; unminedFeeWei: bigint }, payment: { amountMicros: bigint; networkFee: NetworkFee | null },
): { rule: 'treasury_funds' | 'treasury_gas'; reason: string } | null {
  const reasons: string[] = [];
  const neededMicros = payment.amountMicros + unmined.unminedMicros;
  if (funds.tokenBalance < neededMicros) {
    reasons.push(`Treasury has too little USDC on chain ${chainId} (treasury_insufficient_funds): balance $${formatUsd(funds.tokenBalance)}, `
      + `this payment $${formatUsd(payment.amountMicros)} plus $${formatUsd(unmined.unminedMicros)} signed and not yet mined; $${formatUsd(neededMicros - funds.tokenBalance)} missing`);
  }
  const feeWei = payment.networkFee ? maxNetworkFeeWei(payment.networkFee) : 0n;
  const neededWei = feeWei + unmined.unminedFeeWei;
  if (funds.nativeBalanceWei < neededWei) {
    reasons.push(`Treasury has too little ETH for gas on chain ${chainId} (treasury_insufficient_gas): balance ${formatEth(funds.nativeBalanceWei)} ETH, `
      + `this payment up to ${formatEth(feeWei)} ETH (gas × max fee per gas) plus up to ${formatEth(unmined.unminedFeeWei)} ETH for transactions signed and not yet mined; `
      + `${formatEth(neededWei - funds.nativeBalanceWei)} ETH missing`);
  }
  if (reasons.length === 0) return null;
  return { rule: funds.tokenBalance < neededMicros ? 'treasury_funds' : 'treasury_gas', reason: reasons.join('. ') };
}

/**
 * The error refusing a human's approval of a raw transaction the treasury cannot pay: the decision
 * is not made and the approval stays pending (like a failed policy re-check), so it can be
 * approved once the treasury is topped up. Its code is the shortfall's.
 */
export function treasuryRefusal(verdict: Verdict & { outcome: 'denied' }): DomainError | undefined {
  if (verdict.rule === 'treasury_funds') return new DomainError('failed_precondition', verdict.reason, { code: 'treasury_insufficient_funds' });
  if (verdict.rule === 'treasury_gas') return new DomainError('failed_precondition', verdict.reason, { code: 'treasury_insufficient_gas' });
  return undefined;
}
