import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { hexToBytes, type Address, type Hex } from 'viem';
import type * as Edr from '@nomicfoundation/edr';

/**
 * A local EVM for tests: EDR (Hardhat's Rust EVM, an npm devDependency with its native linux-x64
 * package pinned beside it), automining, in memory, served over HTTP on 127.0.0.1 so the real
 * server under test reaches it through its configured --rpc-url. See shared/notes/local-evm.md
 * for the quirks smoothed here: requests without params, responses without jsonrpc/id, EDR's
 * revert error shape, and blocks in the same second keeping the same timestamp.
 */

const require = createRequire(import.meta.url);
let context: Edr.EdrContext | undefined;
let edr: typeof Edr | undefined;

/** EDR wants one context per process; a second prints a tracing warning. */
async function edrContext(): Promise<{ edr: typeof Edr; context: Edr.EdrContext }> {
  if (!edr || !context) {
    edr = require('@nomicfoundation/edr') as typeof Edr;
    context = new edr.EdrContext();
    await context.registerProviderFactory(edr.L1_CHAIN_TYPE, edr.l1ProviderFactory());
  }
  return { edr, context };
}

export type JsonRpcResponse = { jsonrpc: '2.0'; id: unknown; result?: unknown; error?: { code: number; message: string; data?: unknown } };

export type LocalChain = {
  chainId: number;
  /** One JSON-RPC call answered by the chain (no HTTP); throws on an error response. */
  rpc(method: string, params?: unknown[]): Promise<unknown>;
  /**
   * Serves the chain on 127.0.0.1:`port` (0: any free port). `close` stops answering (the chain
   * and its state stay), so a test can take the node "down" and bring it back on the same port.
   */
  listen(port?: number): Promise<{ url: string; port: number; close: () => Promise<void> }>;
};

export type LocalChainOptions = { chainId: number; accounts?: Array<{ address: Address; balance: bigint }> };

export async function createLocalChain(opts: LocalChainOptions): Promise<LocalChain> {
  const { edr: e, context: ctx } = await edrContext();
  const config: Edr.ProviderConfig = {
    allowBlocksWithSameTimestamp: true,
    allowUnlimitedContractSize: false,
    bailOnCallFailure: true,
    bailOnTransactionFailure: false,
    chainId: BigInt(opts.chainId),
    coinbase: hexToBytes('0xc014ba5ec014ba5ec014ba5ec014ba5ec014ba5e'),
    defaultTransactionGasLimit: 30_000_000n,
    genesisState: (opts.accounts ?? []).map((a) => ({ address: hexToBytes(a.address), balance: a.balance })),
    hardfork: e.PRAGUE,
    // Low, so the service's default raw-transaction fee ceiling (1 gwei) always covers it.
    initialBaseFeePerGas: 10_000_000n,
    minGasPrice: 0n,
    mining: { autoMine: true, memPool: { order: e.MineOrdering.Priority } },
    network: { genesisBlockGasLimit: 30_000_000n },
    networkId: BigInt(opts.chainId),
    observability: {},
    ownedAccounts: [],
    precompileOverrides: [],
  };
  const provider = await ctx.createProvider(
    e.L1_CHAIN_TYPE, config,
    { enable: false, decodeConsoleLogInputsCallback: () => [], printLineCallback: () => {} },
    { subscriptionCallback: () => {} },
    new e.ContractDecoder(),
  );

  /** One request as EDR answers it, reshaped into a standard JSON-RPC response. */
  async function handle(body: { id?: unknown; method: string; params?: unknown[] }): Promise<JsonRpcResponse> {
    const res = await provider.handleRequest(JSON.stringify({ jsonrpc: '2.0', id: body.id ?? 1, method: body.method, params: body.params ?? [] }));
    const data = (typeof res.data === 'string' ? JSON.parse(res.data) : res.data) as { result?: unknown; error?: { code: number; message: string; data?: unknown } };
    const out: JsonRpcResponse = { jsonrpc: '2.0', id: body.id ?? null };
    if (data.error) {
      const revert = (data.error.data as { data?: unknown } | undefined)?.data;
      out.error = typeof revert === 'string' && revert.startsWith('0x')
        ? { code: 3, message: `execution reverted: ${data.error.message}`, data: revert as Hex }
        : { code: data.error.code, message: data.error.message };
    } else {
      out.result = data.result ?? null;
    }
    return out;
  }

  return {
    chainId: opts.chainId,
    async rpc(method, params = []) {
      const res = await handle({ method, params });
      if (res.error) throw new Error(`${method}: ${res.error.message}`);
      return res.result;
    },
    async listen(port = 0) {
      const server: Server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          void (async () => {
            let answer: unknown;
            try {
              const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
              answer = Array.isArray(body) ? await Promise.all(body.map((b) => handle(b as { method: string }))) : await handle(body as { method: string });
            } catch (err) {
              answer = { jsonrpc: '2.0', id: null, error: { code: -32700, message: String((err as Error).message) } };
            }
            res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
          })();
        });
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => resolve());
      });
      const bound = (server.address() as AddressInfo).port;
      return {
        url: `http://127.0.0.1:${bound}`,
        port: bound,
        close: () => new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
      };
    },
  };
}

/**
 * Puts MiniUSDC (test/fixtures/MiniUSDC.sol) at `at`, the address the service signs transfers to
 * (USDC's canonical address for the chain): deployed by `deployer` (which stays the minter, fixed
 * in the runtime code), its runtime code copied to `at`, then `mints` minted there.
 */
export async function installMiniUsdc(chain: LocalChain, at: Address, deployerKey: Hex, mints: Array<{ to: Address; amount: bigint }>): Promise<void> {
  const { createWalletClient, custom, publicActions, encodeFunctionData } = await import('viem');
  const { privateKeyToAccount } = await import('viem/accounts');
  const fixture = require('../fixtures/MiniUSDC.json') as { abi: unknown[]; bytecode: Hex };
  const account = privateKeyToAccount(deployerKey);
  const chainDef = { id: chain.chainId, name: 'local', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } } as const;
  const wallet = createWalletClient({ account, chain: chainDef, transport: custom({ request: ({ method, params }) => chain.rpc(method, params as unknown[]) }, { retryCount: 0 }) }).extend(publicActions);
  const deployed = await wallet.waitForTransactionReceipt({ hash: await wallet.deployContract({ abi: fixture.abi, bytecode: fixture.bytecode }), pollingInterval: 10 });
  if (deployed.status !== 'success' || !deployed.contractAddress) throw new Error('MiniUSDC deployment failed');
  await chain.rpc('hardhat_setCode', [at, await chain.rpc('eth_getCode', [deployed.contractAddress, 'latest'])]);
  for (const m of mints) {
    const hash = await wallet.sendTransaction({ to: at, data: encodeFunctionData({ abi: MINI_USDC_ABI, functionName: 'mint', args: [m.to, m.amount] }) });
    const receipt = await wallet.waitForTransactionReceipt({ hash, pollingInterval: 10 });
    if (receipt.status !== 'success') throw new Error('MiniUSDC mint failed');
  }
}

/** The part of MiniUSDC's ABI tests call. */
export const MINI_USDC_ABI = [
  { type: 'function', name: 'mint', stateMutability: 'nonpayable', inputs: [{ name: 'to', type: 'address' }, { name: 'value', type: 'uint256' }], outputs: [] },
  { type: 'function', name: 'balanceOf', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] },
] as const;
