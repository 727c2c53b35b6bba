import { getAddress, type Address } from 'viem';

/*
 * Token tables for pricing 402 challenges. Neither x402 nor MPP carries decimals on the wire, so
 * an offer is priced only when (chain, token address) is listed here; everything else is refused
 * rather than guessed. Sources: shared/protocols/x402.md §2 and §9 (@x402/evm 2.27.0
 * `EVM_NETWORK_CHAIN_ID_MAP` and `DEFAULT_ASSETS`, plus the legacy x402 1.2.0 v1 table) and
 * shared/protocols/mpp.md §5.3 (viem 2.57.13 `viem/tokens`). Every lookup goes through a Map so
 * that wire strings such as `constructor` or `__proto__` can never hit Object.prototype.
 */

/** A USD stablecoin an x402 offer can be priced in, with the EIP-712 domain its issuer deployed. */
export type X402Stablecoin = {
  chainId: number;
  symbol: string;
  /** Checksummed token contract. */
  address: Address;
  decimals: number;
  /** Informational: a payment signs with the challenge's own `extra.name`/`extra.version`. */
  eip712Name: string;
  eip712Version: string;
};

/** A USD-denominated TIP-20 token on a Tempo chain (TIP-20 tokens always have 6 decimals). */
export type TempoUsdToken = {
  chainId: number;
  symbol: string;
  /** Checksummed token contract. */
  address: Address;
  decimals: 6;
};

/** x402 v1 network names and the EVM chain ids they stand for (@x402/evm 2.27.0 `EVM_NETWORK_CHAIN_ID_MAP`). */
export const X402_V1_NETWORKS: ReadonlyMap<string, number> = new Map([
  ['ethereum', 1],
  ['sepolia', 11155111],
  ['abstract', 2741],
  ['abstract-testnet', 11124],
  ['base-sepolia', 84532],
  ['base', 8453],
  ['avalanche-fuji', 43113],
  ['avalanche', 43114],
  ['iotex', 4689],
  ['sei', 1329],
  ['sei-testnet', 1328],
  ['polygon', 137],
  ['polygon-amoy', 80002],
  ['peaq', 3338],
  ['story', 1514],
  ['educhain', 41923],
  ['skale-base-sepolia', 324705682],
  ['megaeth', 4326],
  ['monad', 143],
  ['stable', 988],
  ['stable-testnet', 2201],
  ['celo', 42220],
  ['flare', 14],
]);

/** Tempo chain ids and the network names paypolicy reports for them (MPP only; never x402). */
export const TEMPO_NETWORKS: ReadonlyMap<number, string> = new Map([
  [4217, 'tempo'],
  [42431, 'tempo-testnet'],
]);

// [chainId, symbol, address, EIP-712 name, EIP-712 version, decimals]
type StablecoinRow = readonly [number, string, string, string, string, number];

const X402_STABLECOIN_ROWS: readonly StablecoinRow[] = [
  // @x402/evm 2.27.0 DEFAULT_ASSETS.
  [8453, 'USDC', '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', 'USD Coin', '2', 6],
  [84532, 'USDC', '0x036CbD53842c5426634e7929541eC2318f3dCF7e', 'USDC', '2', 6],
  [1, 'USDC', '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48', 'USD Coin', '2', 6],
  [43114, 'USDC', '0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E', 'USD Coin', '2', 6],
  [137, 'USDC', '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359', 'USD Coin', '2', 6],
  [42161, 'USDC', '0xaf88d065e77c8cC2239327C5EDb3A432268e5831', 'USD Coin', '2', 6],
  [421614, 'USDC', '0x75faf114eafb1BDbe2F0316DF893fd58CE46AA4d', 'USD Coin', '2', 6],
  // 2.10.0 called Monad USDC "USD Coin"; the challenge's extra decides what is signed.
  [143, 'USDC', '0x754704Bc059F8C67012fEd69BC8A327a5aafb603', 'USDC', '2', 6],
  [988, 'USDT0', '0x779Ded0c9e1022225f8E0630b35a9b54bE713736', 'USDT0', '1', 6],
  [2201, 'USDT0', '0x78Cf24370174180738C5B8E352B6D14c83a6c9A9', 'USDT0', '1', 6],
  [4326, 'MegaUSD', '0xFAfDdbb3FC7688494971a79cc65DCa3EF82079E7', 'MegaUSD', '1', 18],
  [31612, 'mUSD', '0xdD468A1DDc392dcdbEf6db6e34E89AA338F9F186', 'Mezo USD', '1', 18],
  [31611, 'mUSD', '0x118917a40FAF1CD7a13dB0Ef56C86De7973Ac503', 'Mezo USD', '1', 18],
  [723487, 'SBC', '0x33ad9e4BD16B69B5BFdED37D8B5D9fF9aba014Fb', 'Stable Coin', '1', 6],
  [72344, 'SBC', '0x33ad9e4BD16B69B5BFdED37D8B5D9fF9aba014Fb', 'Stable Coin', '1', 6],
  [36900, 'USDC.e', '0x9cb8142aEBBcdc60AF7c97Af897A67A8f3CA71C2', 'USDC.e', '2', 6],
  [190415, 'USDC.e', '0x401eCb1D350407f13ba348573E5630B83638E30D', 'Bridged USDC', '2', 6],
  [181228, 'USDC.e', '0x401eCb1D350407f13ba348573E5630B83638E30D', 'Bridged USDC', '2', 6],
  [50, 'USDC', '0xfA2958CB79b0491CC627c1557F441eF849Ca8eb1', 'USDC', '2', 6],
  [51, 'USDC', '0xb5AB69F7bBada22B28e79C8FFAECe55eF1c771D4', 'USDC', '2', 6],
  [38833, 'USDC', '0xA5b8BF902b2844dA17d4506cc827F7F1681735E7', 'USDC', '1', 6],
  [14, 'USDT0', '0xe7cd86e13AC4309349F30B3435a9d337750fC82D', 'USD₮0', '1', 6],
  [42220, 'USDC', '0xcebA9300f2b948710d2653dD7B07f33A8B32118C', 'USDC', '2', 6],
  [42220, 'USDT', '0x48065fbBE25f71C9282ddf5e1cD6D6A887483D5e', 'Tether USD', '1', 6],
  [42220, 'USAT', '0xD2ab3C9A02DBBAB236BfEC45D1d755DF4267F771', 'Tether America USD', '1', 6],
  [11142220, 'USDC', '0x01C5C0122039549AD1493B8220cABEdD739BC44E', 'USDC', '2', 6],
  [1329, 'USDC', '0xe15fC38F6D8c56aF07bbCBe3BAf5708A2Bf42392', 'USDC', '2', 6],
  [1328, 'USDC', '0x4fCF1784B31630811181f670Aea7A7bEF803eaED', 'USDC', '2', 6],
  // Legacy x402 1.2.0 v1 networks that 2.27.0 no longer lists (it always used decimals 6, version "2").
  [43113, 'USDC', '0x5425890298aed601595a70AB815c96711a31Bc65', 'USD Coin', '2', 6],
  [80002, 'USDC', '0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582', 'USDC', '2', 6],
  [3338, 'USDC', '0xbbA60da06c2c5424f03f7434542280FCAd453d10', 'USDC', '2', 6],
  [4689, 'USDC.e', '0xcdf79194c6c285077a58da47641d4dbe51f63542', 'Bridged USDC', '2', 6],
  [2741, 'USDC.e', '0x84a71ccd554cc1b02749b35d22f684cc8ec987e1', 'Bridged USDC', '2', 6],
  [11124, 'USDC.e', '0xe4C7fBB0a626ed208021ccabA6Be1566905E2dFc', 'Bridged USDC', '2', 6],
  [1514, 'USDC.e', '0xF1815bd50389c46847f0Bda824eC8da914045D14', 'Bridged USDC', '2', 6],
  [41923, 'USDC.e', '0x12a272A581feE5577A5dFa371afEB4b2F3a8C2F8', 'Bridged USDC (Stargate)', '2', 6],
  [324705682, 'USDC.e', '0x2e08028E3C4c2356572E096d8EF835cD5C6030bD', 'Bridged USDC (SKALE Bridge)', '2', 6],
];

// Only USD-denominated, non-yield-bearing tokens: EUR/GBP/CHF/BRL/BTC and yield tokens would
// need an exchange rate, so they are deliberately absent and therefore unpriceable.
const TEMPO_USD_ROWS: readonly (readonly [number, string, string])[] = [
  [4217, 'pathUSD', '0x20c0000000000000000000000000000000000000'],
  [4217, 'USDC.e', '0x20c000000000000000000000b9537d11c60e8b50'],
  [4217, 'USDT0', '0x20c00000000000000000000014f22ca97301eb73'],
  [4217, 'USD1', '0x20c000000000000000000000111111111e910f0f'],
  [4217, 'USDe', '0x20c0000000000000000000002f52d5cc21a3207b'],
  [4217, 'USDB', '0x20c0000000000000000000003158081efd85bfc2'],
  [4217, 'frxUSD', '0x20c0000000000000000000003554d28269e0f3c2'],
  [4217, 'cUSD', '0x20c0000000000000000000000520792dcccccccc'],
  [4217, 'OUSD', '0x20c0000000000000000000006a37da5c996874be'],
  [4217, 'DLUSD', '0x20c0000000000000000000006fd9a167923ba194'],
  [4217, 'GUSD', '0x20c0000000000000000000005c0bac7cef389a11'],
  [4217, 'iUSD', '0x20c000000000000000000000ab02d39df30bd17e'],
  [4217, 'rUSD', '0x20c0000000000000000000007f7ba549dd0251b9'],
  [4217, 'reUSD', '0x20c000000000000000000000383a23bacb546ab9'],
  [4217, 'SBC', '0x20c000000000000000000000ae247a1130450f09'],
  [42431, 'pathUSD', '0x20c0000000000000000000000000000000000000'],
  [42431, 'alphaUSD', '0x20c0000000000000000000000000000000000001'],
  [42431, 'betaUSD', '0x20c0000000000000000000000000000000000002'],
  [42431, 'thetaUSD', '0x20c0000000000000000000000000000000000003'],
  [42431, 'USDC.e', '0x20c0000000000000000000009e8d7eb59b783726'],
];

// Keyed by `${chainId}:${lowercase address}`: addresses compare as 20-byte values, never by case.
const tokenKey = (chainId: number, address: string): string => `${chainId}:${address.toLowerCase()}`;

const X402_STABLECOINS: ReadonlyMap<string, X402Stablecoin> = new Map(
  X402_STABLECOIN_ROWS.map(([chainId, symbol, address, eip712Name, eip712Version, decimals]) => [
    tokenKey(chainId, address),
    // Lowercased first: getAddress rejects a mixed-case input whose checksum is off.
    { chainId, symbol, address: getAddress(address.toLowerCase()), decimals, eip712Name, eip712Version },
  ]),
);

const X402_CHAINS: ReadonlySet<number> = new Set(X402_STABLECOIN_ROWS.map(([chainId]) => chainId));

const TEMPO_USD_TOKENS: ReadonlyMap<string, TempoUsdToken> = new Map(
  TEMPO_USD_ROWS.map(([chainId, symbol, address]) => [
    tokenKey(chainId, address),
    { chainId, symbol, address: getAddress(address.toLowerCase()), decimals: 6 as const },
  ]),
);

const CAIP2_EIP155 = /^eip155:([1-9][0-9]{0,15})$/;

/** Resolves an x402 network (a v1 name such as `base`, or CAIP-2 `eip155:<id>`) to its chain id. */
export function resolveX402ChainId(network: string): number | undefined {
  const named = X402_V1_NETWORKS.get(network);
  if (named !== undefined) return named;
  const m = CAIP2_EIP155.exec(network);
  if (!m) return undefined;
  const id = Number(m[1]);
  return Number.isSafeInteger(id) ? id : undefined;
}

/** True when paypolicy can price some x402 stablecoin on `chainId` (Tempo chains never qualify). */
export function isX402PayableChain(chainId: number): boolean {
  // Tempo tokens have no EIP-3009 transferWithAuthorization; Tempo is paid through MPP only.
  if (TEMPO_NETWORKS.has(chainId)) return false;
  return X402_CHAINS.has(chainId);
}

/** Finds the x402 stablecoin at `address` on `chainId` (address compared case-insensitively). */
export function findX402Stablecoin(chainId: number, address: string): X402Stablecoin | undefined {
  return X402_STABLECOINS.get(tokenKey(chainId, address));
}

/** Lists every x402 stablecoin in the table, in table order. */
export function listX402Stablecoins(): X402Stablecoin[] {
  return [...X402_STABLECOINS.values()];
}

/** Finds the USD-denominated Tempo TIP-20 token at `address` on `chainId` (case-insensitive). */
export function findTempoUsdToken(chainId: number, address: string): TempoUsdToken | undefined {
  return TEMPO_USD_TOKENS.get(tokenKey(chainId, address));
}
