import type { Logger } from 'pino';
import { BaseError, createPublicClient, encodeFunctionData, http, type Address } from 'viem';
import { Abis } from 'viem/tempo';
import type { Offer } from '../probe/offer.js';
import { DEFAULT_TEMPO_FEES, MAX_TEMPO_FEE, type TempoFees } from './tempo.js';

/** Where MPP payments get their gas and fee values. */
export type TempoFeeSource = { feesFor(offer: Offer, treasury: Address): Promise<TempoFees> };

/** Bounds on values an RPC may hand us: a broken or hostile node must not set a silly fee. */
const LIMITS = { maxGas: 2_000_000n, minGas: 21_000n, maxFeePerGas: 100_000_000_000n } as const;
/** mppx adds this much to its own estimate; a transfer's cost can shift between estimate and inclusion. */
const GAS_BUFFER = 5_000n;
const PRICE_TTL_MS = 5_000;

/** Tempo fee answers are a few hex words; a node sending more is broken or hostile. */
const MAX_RPC_RESPONSE_BYTES = 64 * 1024;

/**
 * viem's public client for the raw JSON-RPC calls: no retries (a slow node must not hold a payment
 * past `timeoutMs`), the body read within the timeout and capped. Results are still checked by
 * `quantity`, since viem types them but does not validate them.
 */
function rpcClient(url: string, timeoutMs: number) {
  return createPublicClient({ transport: http(url, { timeout: timeoutMs, retryCount: 0, maxResponseBodySize: MAX_RPC_RESPONSE_BYTES }) });
}

/** A one-line reason for the log: viem's full message also names the URL, which may carry a provider key. */
function reason(err: unknown): string {
  const text = err instanceof BaseError ? [err.shortMessage, err.details].filter(Boolean).join(' ') : String((err as Error)?.message ?? err);
  return text.replace(/\s+/g, ' ').slice(0, 200);
}

function quantity(value: unknown, what: string): bigint {
  if (typeof value !== 'string' || !/^0x[0-9a-fA-F]{1,64}$/.test(value)) throw new Error(`${what} is not a hex quantity`);
  return BigInt(value);
}

/**
 * Gas and fees for MPP Tempo transactions. Without an RPC endpoint, the documented defaults
 * (DEFAULT_TEMPO_FEES). With one, for offers on the chain it serves: gas from eth_estimateGas of
 * the primary transfer (plus a buffer, and once more per split), maxFeePerGas twice eth_gasPrice,
 * the tip from eth_maxPriorityFeePerGas, all bounded, and the price lowered when gas × price would
 * exceed MAX_TEMPO_FEE (a payment that then underbids the chain fails; it never overpays). Prices are reused for 5 s. If the RPC fails
 * the defaults are used and a warning logged: a payment should not fail because a fee estimate did.
 */
export function createTempoFeeSource(rpcUrl: string | undefined, log: Logger, timeoutMs = 2_000): TempoFeeSource {
  if (!rpcUrl) return { feesFor: async () => DEFAULT_TEMPO_FEES };
  const rpc = rpcClient(rpcUrl, timeoutMs);
  let chainId: Promise<number> | undefined;
  let prices: { at: number; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | undefined;

  async function currentPrices() {
    if (prices && Date.now() - prices.at < PRICE_TTL_MS) return prices;
    const [gasPrice, tip] = await Promise.all([rpc.request({ method: 'eth_gasPrice' }), rpc.request({ method: 'eth_maxPriorityFeePerGas' })]);
    let maxFeePerGas = 2n * quantity(gasPrice, 'eth_gasPrice');
    if (maxFeePerGas > LIMITS.maxFeePerGas) maxFeePerGas = LIMITS.maxFeePerGas;
    let maxPriorityFeePerGas = quantity(tip, 'eth_maxPriorityFeePerGas');
    if (maxPriorityFeePerGas > maxFeePerGas) maxPriorityFeePerGas = maxFeePerGas;
    prices = { at: Date.now(), maxFeePerGas, maxPriorityFeePerGas };
    return prices;
  }

  return {
    async feesFor(offer, treasury) {
      try {
        chainId ??= rpc.request({ method: 'eth_chainId' }).then((v) => Number(quantity(v, 'eth_chainId')));
        if ((await chainId) !== offer.chainId) return DEFAULT_TEMPO_FEES;
        const request = offer.mpp!.request;
        const data = encodeFunctionData({ abi: Abis.tip20, functionName: 'transferWithMemo', args: [offer.payTo, offer.amountAtomic, `0x${'00'.repeat(32)}`] });
        const [estimate, p] = await Promise.all([rpc.request({ method: 'eth_estimateGas', params: [{ from: treasury, to: request.currency, data }] }), currentPrices()]);
        const transfers = BigInt(1 + (request.methodDetails.splits?.length ?? 0));
        let gas = (quantity(estimate, 'eth_estimateGas') + GAS_BUFFER) * transfers;
        if (gas < LIMITS.minGas) gas = LIMITS.minGas;
        if (gas > LIMITS.maxGas) gas = LIMITS.maxGas;
        const maxFeePerGas = gas * p.maxFeePerGas > MAX_TEMPO_FEE ? MAX_TEMPO_FEE / gas : p.maxFeePerGas;
        const maxPriorityFeePerGas = p.maxPriorityFeePerGas > maxFeePerGas ? maxFeePerGas : p.maxPriorityFeePerGas;
        return { gas, maxFeePerGas, maxPriorityFeePerGas };
      } catch (err) {
        chainId = undefined;
        log.warn({ err: reason(err) }, 'Tempo fee estimate failed; using the default fees');
        return DEFAULT_TEMPO_FEES;
      }
    },
  };
}
