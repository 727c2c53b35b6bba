import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { concat, getAddress, getCreate2Address, hexToBytes, keccak256, type Abi, type Address, type Hex } from 'viem';
import type * as Edr from '@nomicfoundation/edr';
import { PERMIT2_ADDRESS, USDC } from '../../src/signing/tokens.js';

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
 * in the runtime code), its runtime code copied to `at`, then `mints` minted there. `name` is the
 * EIP-712 domain name, also fixed in the runtime code; by default the one paypolicy signs with on
 * this chain (src/signing/tokens.ts: "USDC" on 84532, "USD Coin" on 8453). Installing again at
 * the same address replaces the code and keeps the balances (they are the address's storage).
 */
export async function installMiniUsdc(
  chain: LocalChain, at: Address, deployerKey: Hex, mints: Array<{ to: Address; amount: bigint }>, name: string = USDC[chain.chainId]?.name ?? 'USD Coin',
): Promise<void> {
  const { createWalletClient, custom, publicActions, encodeFunctionData } = await import('viem');
  const { privateKeyToAccount } = await import('viem/accounts');
  const fixture = require('../fixtures/MiniUSDC.json') as { abi: unknown[]; bytecode: Hex };
  const account = privateKeyToAccount(deployerKey);
  const chainDef = { id: chain.chainId, name: 'local', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [] } } } as const;
  const wallet = createWalletClient({ account, chain: chainDef, transport: custom({ request: ({ method, params }) => chain.rpc(method, params as unknown[]) }, { retryCount: 0 }) }).extend(publicActions);
  const deployed = await wallet.waitForTransactionReceipt({ hash: await wallet.deployContract({ abi: fixture.abi, bytecode: fixture.bytecode, args: [name] }), pollingInterval: 10 });
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

/**
 * MiniUSDC's EIP-3009 and EIP-2612 surface and its ERC-20 approval, for tests that relay
 * authorizations (written out so the tests state what they call; the fixture JSON has the rest).
 */
export const MINI_USDC_AUTHORIZATION_ABI = [
  { type: 'function', name: 'name', stateMutability: 'view', inputs: [], outputs: [{ name: '', type: 'string' }] },
  { type: 'function', name: 'version', stateMutability: 'view', inputs: [], outputs: [{ name: '', type: 'string' }] },
  { type: 'function', name: 'DOMAIN_SEPARATOR', stateMutability: 'view', inputs: [], outputs: [{ name: '', type: 'bytes32' }] },
  { type: 'function', name: 'balanceOf', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] },
  { type: 'function', name: 'allowance', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }, { name: 'spender', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] },
  { type: 'function', name: 'approve', stateMutability: 'nonpayable', inputs: [{ name: 'spender', type: 'address' }, { name: 'value', type: 'uint256' }], outputs: [{ name: '', type: 'bool' }] },
  { type: 'function', name: 'authorizationState', stateMutability: 'view', inputs: [{ name: 'authorizer', type: 'address' }, { name: 'nonce', type: 'bytes32' }], outputs: [{ name: '', type: 'bool' }] },
  {
    type: 'function', name: 'transferWithAuthorization', stateMutability: 'nonpayable', outputs: [],
    inputs: [
      { name: 'from', type: 'address' }, { name: 'to', type: 'address' }, { name: 'value', type: 'uint256' }, { name: 'validAfter', type: 'uint256' },
      { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' }, { name: 'v', type: 'uint8' }, { name: 'r', type: 'bytes32' }, { name: 's', type: 'bytes32' },
    ],
  },
  {
    type: 'function', name: 'transferWithAuthorization', stateMutability: 'nonpayable', outputs: [],
    inputs: [
      { name: 'from', type: 'address' }, { name: 'to', type: 'address' }, { name: 'value', type: 'uint256' }, { name: 'validAfter', type: 'uint256' },
      { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' }, { name: 'signature', type: 'bytes' },
    ],
  },
  {
    type: 'function', name: 'receiveWithAuthorization', stateMutability: 'nonpayable', outputs: [],
    inputs: [
      { name: 'from', type: 'address' }, { name: 'to', type: 'address' }, { name: 'value', type: 'uint256' }, { name: 'validAfter', type: 'uint256' },
      { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' }, { name: 'signature', type: 'bytes' },
    ],
  },
  {
    type: 'function', name: 'cancelAuthorization', stateMutability: 'nonpayable', outputs: [],
    inputs: [{ name: 'authorizer', type: 'address' }, { name: 'nonce', type: 'bytes32' }, { name: 'signature', type: 'bytes' }],
  },
  { type: 'function', name: 'nonces', stateMutability: 'view', inputs: [{ name: 'owner', type: 'address' }], outputs: [{ name: '', type: 'uint256' }] },
  {
    type: 'function', name: 'permit', stateMutability: 'nonpayable', outputs: [],
    inputs: [
      { name: 'owner', type: 'address' }, { name: 'spender', type: 'address' }, { name: 'value', type: 'uint256' }, { name: 'deadline', type: 'uint256' },
      { name: 'signature', type: 'bytes' },
    ],
  },
] as const;

/** Permit2's fixture (test/fixtures/Permit2.json): creation code and ABI from @uniswap/uniswapx-sdk, and where they came from. */
export type Permit2Fixture = {
  origin: { package: string; version: string; file: string; bytecodeKeccak256: Hex };
  abi: Abi;
  bytecode: Hex;
};

/** The deployed Permit2's full ABI (with its custom errors, so viem names a revert like InvalidNonce). */
export const PERMIT2_ABI: Abi = (require('../fixtures/Permit2.json') as Permit2Fixture).abi;

/** The deterministic-deployment proxy (Arachnid's CREATE2 factory) and its runtime code; Uniswap deployed Permit2 through it. */
const CREATE2_FACTORY: Address = '0x4e59b44847b379578588920ca78fbf26c0b4956c';
const CREATE2_FACTORY_CODE: Hex = '0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf3';
/** The salt of Uniswap's Permit2 deployment: with the fixture's creation code it yields the canonical address. */
const PERMIT2_SALT: Hex = '0x0000000000000000000000000000000000000000d3af2663da51c10215000000';

/**
 * Deploys Permit2 at its canonical address 0x000000000022D473030F116dDEE9F6B43aC78BA3 the way it
 * was deployed on every chain (CREATE2 through the deterministic-deployment proxy), so its cached
 * EIP-712 domain separator is the one for this chain and that address. Copying runtime code there
 * would not do: Permit2 keeps the deploy address and chain id in immutables. Idempotent.
 */
export async function installPermit2(chain: LocalChain): Promise<Address> {
  const fixture = require('../fixtures/Permit2.json') as Permit2Fixture;
  if (keccak256(fixture.bytecode) !== fixture.origin.bytecodeKeccak256) throw new Error('Permit2.json: bytecode does not match its recorded keccak');
  if (getCreate2Address({ from: CREATE2_FACTORY, salt: PERMIT2_SALT, bytecode: fixture.bytecode }) !== getAddress(PERMIT2_ADDRESS)) {
    throw new Error('Permit2.json: this creation code does not deploy to the canonical Permit2 address');
  }
  if ((await chain.rpc('eth_getCode', [PERMIT2_ADDRESS, 'latest'])) !== '0x') return PERMIT2_ADDRESS;
  if ((await chain.rpc('eth_getCode', [CREATE2_FACTORY, 'latest'])) === '0x') await chain.rpc('hardhat_setCode', [CREATE2_FACTORY, CREATE2_FACTORY_CODE]);
  // Any account may call the factory; a throwaway impersonated one keeps the tests' accounts' nonces untouched.
  const deployer: Address = '0x00000000000000000000000000000000000d3910';
  await chain.rpc('hardhat_setBalance', [deployer, '0xde0b6b3a7640000']);
  const receipt = await sendAs(chain, deployer, { to: CREATE2_FACTORY, data: concat([PERMIT2_SALT, fixture.bytecode]), gas: 5_000_000n });
  if (receipt.status !== '0x1' || (await chain.rpc('eth_getCode', [PERMIT2_ADDRESS, 'latest'])) === '0x') throw new Error('Permit2 deployment failed');
  return PERMIT2_ADDRESS;
}

/**
 * Sends one transaction from `from` without its key (hardhat_impersonateAccount): how a test makes
 * an account it does not hold act, e.g. the treasury approving Permit2 (paypolicy never sends
 * approvals). `from` needs gas money. Returns the mined receipt (automining), reverted or not.
 */
export async function sendAs(chain: LocalChain, from: Address, tx: { to: Address; data: Hex; gas?: bigint }): Promise<{ transactionHash: Hex; status: '0x0' | '0x1' }> {
  await chain.rpc('hardhat_impersonateAccount', [from]);
  try {
    const hash = await chain.rpc('eth_sendTransaction', [{ from, to: tx.to, data: tx.data, gas: `0x${(tx.gas ?? 1_000_000n).toString(16)}` }]) as Hex;
    const receipt = await chain.rpc('eth_getTransactionReceipt', [hash]) as { transactionHash: Hex; status: '0x0' | '0x1' } | null;
    if (!receipt) throw new Error(`${hash}: not mined (is automine off?)`);
    return receipt;
  } finally {
    await chain.rpc('hardhat_stopImpersonatingAccount', [from]);
  }
}
