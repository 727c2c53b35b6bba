import { createPublicClient, http, TimeoutError, type Address, type Hex, type PublicClient } from 'viem';
import { readTreasuryFunds, type TreasuryFunds } from './balances.js';

/**
 * The configured EVM JSON-RPC endpoints (--rpc-url / PAYPOLICY_RPC_URLS), one viem public client
 * per chain id. Every call is bounded (no retries, a 2 s timeout by default), so a slow or dead
 * node delays only the payment waiting on it. Without an entry for a chain, nothing is sent
 * there: its raw transactions are signed and returned, never submitted.
 */
export type ChainRpc = {
  /** eth_getTransactionCount(address, 'latest'): how many of the address's transactions are mined. */
  minedNonce(chainId: number, address: Address): Promise<number>;
  /** eth_blockNumber. */
  blockNumber(chainId: number): Promise<bigint>;
  /** The receipt of a mined transaction; null while it is not mined (or unknown); throws on a malformed one. */
  receipt(chainId: number, hash: Hex): Promise<ChainReceipt | null>;
  /**
   * Why a mined transaction reverted, by replaying its call (eth_call against the state after its
   * block, which still holds whatever made it fail): the revert string when the node gives one,
   * else undefined. A hint for the ledger's reason, never a decision.
   */
  revertReason(chainId: number, call: { from: Address; to: Address; data: Hex; gas: bigint }, blockNumber: bigint): Promise<string | undefined>;
  has(chainId: number): boolean;
  chainIds(): number[];
  /** The treasury's token and gas balances and mined nonce, read at one block (balances.ts). */
  treasuryFunds(chainId: number, treasury: Address, token: Address): Promise<TreasuryFunds>;
  /** eth_sendRawTransaction; the node's transaction hash. */
  sendRaw(chainId: number, serialized: Hex): Promise<Hex>;
  /** Whether the node knows the transaction (pending or mined). */
  knows(chainId: number, hash: Hex): Promise<boolean>;
  /** eth_getTransactionCount(address, 'pending'). */
  pendingNonce(chainId: number, address: Address): Promise<number>;
  /**
   * Any other JSON-RPC call on the chain's configured endpoint, with the same bounds (the Tempo
   * fee source asks its gas and price questions here). The result is unchecked: callers validate it.
   */
  request(chainId: number, method: string, params?: unknown[]): Promise<unknown>;
};

/** A JSON-RPC quantity: 0x and at most 64 hex digits (a uint256). */
function isQuantity(v: unknown): v is string {
  return typeof v === 'string' && /^0x[0-9a-fA-F]{1,64}$/.test(v);
}

/** A mined transaction's receipt, as the tracker uses it (app/submission/submit.ts). */
export type ChainReceipt = { status: 'success' | 'reverted'; blockNumber: bigint; gasUsed: bigint; effectiveGasPrice: bigint };

/** Largest JSON-RPC answer read: the calls above answer a few hundred bytes. */
const MAX_RPC_RESPONSE_BYTES = 256 * 1024;

/** How long a chain's node is not asked again after it did not answer within the timeout. */
export const NODE_COOLDOWN_MS = 1_000;

/** A call refused without asking the node, because it did not answer a moment ago. */
export class NodeCoolingDownError extends Error {
  override name = 'NodeCoolingDownError';
}

/**
 * A node that does not answer makes every call wait the whole timeout, and every raw payment of
 * its chain holds a request slot meanwhile. After a timeout the chain's calls fail at once for
 * NODE_COOLDOWN_MS; then one call at a time probes the node (the others still fail at once), and
 * the first answer lets everyone through again. So a hung node keeps at most one call per chain
 * waiting. Only timeouts count: a refused connection or an HTTP error fails fast by itself, and a
 * JSON-RPC error (a refused transaction) is an answer from a live node.
 */
function createBreaker(now: () => number = () => performance.now()) {
  let openUntil = 0;
  let probing = false;
  return async <T>(call: () => Promise<T>): Promise<T> => {
    let probe = false;
    if (openUntil > 0) {
      if (now() < openUntil || probing) throw new NodeCoolingDownError('the node did not answer a moment ago; not asked again yet');
      probe = probing = true;
    }
    try {
      const result = await call();
      if (probe) openUntil = 0;
      return result;
    } catch (err) {
      if (err instanceof TimeoutError) openUntil = now() + NODE_COOLDOWN_MS;
      else if (probe) openUntil = 0;
      throw err;
    } finally {
      if (probe) probing = false;
    }
  };
}

/** viem's HTTP transport with the bounds every call here has (viem sends a URL's user:password as Basic authentication). */
function transportFor(url: string, timeoutMs: number, maxResponseBytes: number) {
  return http(url, { timeout: timeoutMs, retryCount: 0, maxResponseBodySize: maxResponseBytes });
}

export function createChainRpc(urls: ReadonlyMap<number, string> = new Map(), timeoutMs = 2_000): ChainRpc {
  const clients = new Map<number, PublicClient>();
  const breakers = new Map<number, ReturnType<typeof createBreaker>>();
  for (const [chainId, url] of urls) {
    const breaker = createBreaker();
    breakers.set(chainId, breaker);
    const transport = transportFor(url, timeoutMs, MAX_RPC_RESPONSE_BYTES);
    clients.set(chainId, createPublicClient({
      // Every call of this client, whichever method, goes through the chain's breaker.
      transport: (opts) => {
        const t = transport(opts);
        return { ...t, request: ((args: Parameters<typeof t.request>[0]) => breaker(() => t.request(args))) as typeof t.request };
      },
    }));
  }
  const client = (chainId: number): PublicClient => {
    const c = clients.get(chainId);
    if (!c) throw new Error(`no RPC endpoint configured for chain ${chainId}`);
    return c;
  };
  return {
    minedNonce: (chainId, address) => client(chainId).getTransactionCount({ address, blockTag: 'latest' }),
    blockNumber: (chainId) => client(chainId).getBlockNumber({ cacheTime: 0 }),
    async receipt(chainId, hash) {
      // Raw request: viem's getTransactionReceipt throws when there is none, and a missing
      // receipt is the common answer here. A receipt decides a payment's fate (a revert releases
      // its hold), so only one for the very hash asked, with a status of exactly 0x1 or 0x0 and
      // well-formed quantities, counts. Anything else is an error, not "no receipt": the
      // tracker must not take a mined transaction for one that is not (a conflict, a revert).
      const r = await client(chainId).request({ method: 'eth_getTransactionReceipt', params: [hash] }) as unknown;
      if (r === null) return null;
      const malformed = new Error('the node answered a malformed receipt, or one for another transaction');
      if (typeof r !== 'object') throw malformed;
      const { transactionHash, status, blockNumber, gasUsed, effectiveGasPrice } = r as Record<string, unknown>;
      if (typeof transactionHash !== 'string' || transactionHash.toLowerCase() !== hash.toLowerCase()) throw malformed;
      if (status !== '0x1' && status !== '0x0') throw malformed;
      if (![blockNumber, gasUsed, effectiveGasPrice].every(isQuantity)) throw malformed;
      return {
        status: status === '0x1' ? 'success' : 'reverted', blockNumber: BigInt(blockNumber as string),
        gasUsed: BigInt(gasUsed as string), effectiveGasPrice: BigInt(effectiveGasPrice as string),
      };
    },
    async revertReason(chainId, call, blockNumber) {
      try {
        await client(chainId).call({ account: call.from, to: call.to, data: call.data, gas: call.gas, blockNumber });
        return undefined;
      } catch (err) {
        const e = err as { shortMessage?: string; details?: string; cause?: { reason?: string } };
        const reason = e.cause?.reason ?? e.details ?? e.shortMessage;
        return typeof reason === 'string' ? reason.replace(/https?:\/\/\S+/g, '<rpc-url>').slice(0, 200) : undefined;
      }
    },
    has: (chainId) => clients.has(chainId),
    chainIds: () => [...clients.keys()],
    treasuryFunds: (chainId, treasury, token) => readTreasuryFunds(client(chainId), treasury, token),
    sendRaw: (chainId, serialized) => client(chainId).sendRawTransaction({ serializedTransaction: serialized }),
    async knows(chainId, hash) {
      const tx = await client(chainId).request({ method: 'eth_getTransactionByHash', params: [hash] });
      return tx !== null && typeof tx === 'object' && (tx as { hash?: unknown }).hash === hash;
    },
    pendingNonce: (chainId, address) => client(chainId).getTransactionCount({ address, blockTag: 'pending' }),
    // viem's request is typed per method; these calls are generic, their results checked by the caller.
    request: (chainId, method, params = []) => (client(chainId).request as (args: { method: string; params: unknown[] }) => Promise<unknown>)({ method, params }),
  };
}

/**
 * A bounded viem public client for one URL that is not (yet) keyed by chain id: the legacy
 * --tempo-rpc-url. Same rules as the registry's clients: no retries, `timeoutMs` for the whole
 * call including the body, answers capped at `maxResponseBytes`.
 */
export function createBoundedClient(url: string, timeoutMs = 2_000, maxResponseBytes = MAX_RPC_RESPONSE_BYTES): PublicClient {
  return createPublicClient({ transport: transportFor(url, timeoutMs, maxResponseBytes) });
}

/**
 * A short reason for logs and answers from a failed RPC call: viem's full message names the URL,
 * which may carry a provider key or credentials, so any URL is replaced.
 */
export function rpcReason(err: unknown): string {
  const e = err as { shortMessage?: string; details?: string; message?: string };
  return [e.shortMessage ?? e.message, e.details].filter(Boolean).join(' ').replace(/https?:\/\/\S+/g, '<rpc-url>').replace(/\s+/g, ' ').slice(0, 200);
}
