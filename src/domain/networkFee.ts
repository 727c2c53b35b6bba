import { invalidArgument } from './errors.js';

/**
 * Network fees the treasury pays on top of a payment. Only `raw_transaction` has one in wei: the
 * treasury sends the transaction and pays up to gas × max_fee_per_gas in ETH. x402, EIP-3009 and
 * Permit2 payments carry no fee for the payer (the facilitator or whoever submits pays the gas);
 * MPP's Tempo fees are in stablecoin and bounded separately (signing/tempo.ts, MAX_TEMPO_FEE).
 */

/** Default per-payment ceiling for new and existing policies: 10^15 wei (0.001 ETH). */
export const DEFAULT_MAX_NETWORK_FEE_WEI = 10n ** 15n;

/** Largest ceiling a policy may hold: 10^21 wei (1,000 ETH). Anything above is a typo, not a policy. */
export const MAX_NETWORK_FEE_CEILING_WEI = 10n ** 21n;

/** The gas limit and fee cap (wei per gas) of a transaction whose gas the treasury pays. */
export type NetworkFee = { gas: bigint; maxFeePerGas: bigint };

/** The most a transaction can cost in fees: all of its gas at the highest price it allows, in wei. */
export function maxNetworkFeeWei(fee: NetworkFee): bigint {
  return fee.gas * fee.maxFeePerGas;
}

/**
 * Validates a network-fee ceiling given as decimal text: a whole number of wei from 0 to 10^21
 * (0 refuses every payment that carries a fee). Surrounding blanks are ignored; anything else,
 * signs, decimals and exponents included, is a 400 naming the field.
 */
export function parseMaxNetworkFeeWei(value: unknown, field = 'max_network_fee_wei'): bigint {
  // Blanks are refused, as around a USD amount: a value is read exactly as written or not at all.
  const text = typeof value === 'string' ? value : '';
  // The length check keeps a megabyte of digits from reaching BigInt.
  if (!/^\d{1,25}$/.test(text) || BigInt(text) > MAX_NETWORK_FEE_CEILING_WEI) {
    throw invalidArgument(`${field} must be a whole number of wei from 0 to ${MAX_NETWORK_FEE_CEILING_WEI}`);
  }
  return BigInt(text);
}

const GWEI = 1_000_000_000n;

/** A fee as the ledger keeps it for window limits: whole gwei, rounded up, so a window's sum never under-counts (0 without a fee). */
export function feeGweiOf(fee: NetworkFee | null): bigint {
  return fee ? (maxNetworkFeeWei(fee) + GWEI - 1n) / GWEI : 0n;
}

/** The fee a window limit counts for a payment, in wei: what the ledger will hold for it (feeGweiOf), so admission and the window agree. */
export function countedFeeWei(fee: NetworkFee | null): bigint {
  return feeGweiOf(fee) * GWEI;
}
