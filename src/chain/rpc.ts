import { createPublicClient, http, type Address, type Hex, type PublicClient } from 'viem';

/**
 * The configured EVM JSON-RPC endpoints (--rpc-url / PAYPOLICY_RPC_URLS), one viem public client
 * per chain id. Every call is bounded (no retries, a 2 s timeout by default), so a slow or dead
 * node delays only the payment waiting on it. Without an entry for a chain, nothing is sent
 * there: its raw transactions are signed and returned, never submitted.
 */
export type ChainRpc = {
  has(chainId: number): boolean;
  chainIds(): number[];
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

/** Largest JSON-RPC answer read: the calls above answer a few hundred bytes. */
const MAX_RPC_RESPONSE_BYTES = 256 * 1024;

export function createChainRpc(urls: ReadonlyMap<number, string> = new Map(), timeoutMs = 2_000): ChainRpc {
  const clients = new Map<number, PublicClient>();
  for (const [chainId, url] of urls) {
    clients.set(chainId, createPublicClient({ transport: http(url, { timeout: timeoutMs, retryCount: 0, maxResponseBodySize: MAX_RPC_RESPONSE_BYTES }) }));
  }
  const client = (chainId: number): PublicClient => {
    const c = clients.get(chainId);
    if (!c) throw new Error(`no RPC endpoint configured for chain ${chainId}`);
    return c;
  };
  return {
    has: (chainId) => clients.has(chainId),
    chainIds: () => [...clients.keys()],
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
  return createPublicClient({ transport: http(url, { timeout: timeoutMs, retryCount: 0, maxResponseBodySize: maxResponseBytes }) });
}
