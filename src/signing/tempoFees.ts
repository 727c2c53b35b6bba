import type { Logger } from 'pino';
import { BaseError, encodeFunctionData, type Address } from 'viem';
import { createBoundedClient, type ChainRpc } from '../chain/rpc.js';
import type { Offer } from '../paywalls/offer.js';
import { DEFAULT_TEMPO_FEES, MAX_TEMPO_FEE, type TempoFees } from './tempo.js';
import { tip20TransferAbi } from './tip20Abi.js';

/** Where MPP payments get their gas and fee values. */
export type TempoFeeSource = { feesFor(offer: Offer, treasury: Address): Promise<TempoFees> };

/** Bounds on values an RPC may hand us: a broken or hostile node must not set a silly fee. */
const LIMITS = { maxGas: 2_000_000n, minGas: 21_000n, maxFeePerGas: 100_000_000_000n } as const;
/** mppx adds this much to its own estimate; a transfer's cost can shift between estimate and inclusion. */
const GAS_BUFFER = 5_000n;
const PRICE_TTL_MS = 5_000;

/** Tempo fee answers are a few hex words; a node sending more is broken or hostile. */
const MAX_RPC_RESPONSE_BYTES = 64 * 1024;

/** One JSON-RPC endpoint as the fee source uses it: a call, and the key its cached answers live under. */
type Endpoint = { key: string; call: (method: string, params?: unknown[]) => Promise<unknown> };

/**
 * Where the Tempo RPC endpoints come from. `chains` is the one registry of RPC clients
 * (--rpc-url / PAYPOLICY_RPC_URLS, src/chain/rpc.ts): an offer on a chain it has an entry for
 * is estimated there. `legacyUrl` (--tempo-rpc-url / PAYPOLICY_TEMPO_RPC_URL, kept as an alias) serves
 * offers on whatever chain that node answers for, when the registry has no entry for it.
 */
export type TempoRpcEndpoints = { chains?: ChainRpc; legacyUrl?: string };

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
 * Gas and fees for MPP Tempo transactions. Without an RPC endpoint for the offer's chain, the
 * documented defaults (DEFAULT_TEMPO_FEES). With one (the registry's entry for the chain, else the
 * legacy URL when its node serves that chain): gas from eth_estimateGas of
 * the primary transfer (plus a buffer, and once more per split), maxFeePerGas twice eth_gasPrice,
 * the tip from eth_maxPriorityFeePerGas, all bounded, and the price lowered when gas × price would
 * exceed MAX_TEMPO_FEE (a payment that then underbids the chain fails; it never overpays). Prices are reused for 5 s. If the RPC fails
 * the defaults are used and a warning logged: a payment should not fail because a fee estimate did.
 */
export function createTempoFeeSource(endpoints: TempoRpcEndpoints | string | undefined, log: Logger, timeoutMs = 2_000): TempoFeeSource {
  const { chains, legacyUrl } = typeof endpoints === 'string' ? { legacyUrl: endpoints, chains: undefined } : (endpoints ?? {});
  // viem's public client for the raw calls, bounded like every other RPC client (rpc.ts); the
  // alias keeps its tighter answer cap. Results are still checked by `quantity`: viem types them but does not validate them.
  const legacyClient = legacyUrl ? createBoundedClient(legacyUrl, timeoutMs, MAX_RPC_RESPONSE_BYTES) : undefined;
  const legacy: Endpoint | undefined = legacyClient
    ? { key: 'legacy', call: (method, params = []) => (legacyClient.request as (a: { method: string; params: unknown[] }) => Promise<unknown>)({ method, params }) }
    : undefined;
  /** The node's own chain id, asked once per endpoint (again after a failure). */
  const chainIds = new Map<string, Promise<number>>();
  const prices = new Map<string, { at: number; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }>();

  function endpointFor(chainId: number): Endpoint | undefined {
    if (chains?.has(chainId)) return { key: `chain:${chainId}`, call: (method, params) => chains.request(chainId, method, params) };
    return legacy;
  }

  async function currentPrices(rpc: Endpoint) {
    const cached = prices.get(rpc.key);
    if (cached && Date.now() - cached.at < PRICE_TTL_MS) return cached;
    const [gasPrice, tip] = await Promise.all([rpc.call('eth_gasPrice'), rpc.call('eth_maxPriorityFeePerGas')]);
    let maxFeePerGas = 2n * quantity(gasPrice, 'eth_gasPrice');
    if (maxFeePerGas > LIMITS.maxFeePerGas) maxFeePerGas = LIMITS.maxFeePerGas;
    let maxPriorityFeePerGas = quantity(tip, 'eth_maxPriorityFeePerGas');
    if (maxPriorityFeePerGas > maxFeePerGas) maxPriorityFeePerGas = maxFeePerGas;
    const fresh = { at: Date.now(), maxFeePerGas, maxPriorityFeePerGas };
    prices.set(rpc.key, fresh);
    return fresh;
  }

  return {
    async feesFor(offer, treasury) {
      const rpc = endpointFor(offer.chainId);
      if (!rpc) return DEFAULT_TEMPO_FEES;
      try {
        let nodeChain = chainIds.get(rpc.key);
        if (!nodeChain) {
          nodeChain = rpc.call('eth_chainId').then((v) => Number(quantity(v, 'eth_chainId')));
          chainIds.set(rpc.key, nodeChain);
        }
        // A node serving another chain would estimate the wrong network's gas: the defaults are safer.
        if ((await nodeChain) !== offer.chainId) {
          if (rpc.key !== 'legacy') log.warn({ chainId: offer.chainId, nodeChainId: await nodeChain }, 'the RPC endpoint configured for this chain serves another chain; using the default Tempo fees');
          return DEFAULT_TEMPO_FEES;
        }
        const request = offer.mpp!.request;
        const data = encodeFunctionData({ abi: tip20TransferAbi, functionName: 'transferWithMemo', args: [offer.payTo, offer.amountAtomic, `0x${'00'.repeat(32)}`] });
        const [estimate, p] = await Promise.all([rpc.call('eth_estimateGas', [{ from: treasury, to: request.currency, data }]), currentPrices(rpc)]);
        const transfers = BigInt(1 + (request.methodDetails.splits?.length ?? 0));
        let gas = (quantity(estimate, 'eth_estimateGas') + GAS_BUFFER) * transfers;
        if (gas < LIMITS.minGas) gas = LIMITS.minGas;
        if (gas > LIMITS.maxGas) gas = LIMITS.maxGas;
        const maxFeePerGas = gas * p.maxFeePerGas > MAX_TEMPO_FEE ? MAX_TEMPO_FEE / gas : p.maxFeePerGas;
        const maxPriorityFeePerGas = p.maxPriorityFeePerGas > maxFeePerGas ? maxFeePerGas : p.maxPriorityFeePerGas;
        return { gas, maxFeePerGas, maxPriorityFeePerGas };
      } catch (err) {
        chainIds.delete(rpc.key);
        log.warn({ err: reason(err) }, 'Tempo fee estimate failed; using the default fees');
        return DEFAULT_TEMPO_FEES;
      }
    },
  };
}
