import type { Address, Hex } from 'viem';

/**
 * A payable offer parsed from a 402 challenge: what `/api/quote` reports and what `/api/sign`
 * pays for the x402 and mpp types. Amounts are exact integers; nothing here is a float.
 */
export type Offer = {
  rail: 'x402' | 'mpp';
  /** EVM chain id of the offer (8453 Base, 84532 Base Sepolia, 4217 Tempo, 42431 Tempo testnet). */
  chainId: number;
  /** Wire network identifier as the challenge names it: `base`, `eip155:8453`, `tempo`, `tempo-testnet`. */
  network: string;
  /** x402 scheme, e.g. `exact`; null for mpp. */
  scheme: string | null;
  /** MPP auth realm; null for x402. */
  realm: string | null;
  /** On-chain recipient (checksummed). */
  payTo: Address;
  /** Token contract (checksummed). */
  asset: Address;
  /** Price in the token's atomic units, exactly as required. */
  amountAtomic: bigint;
  /** The token's decimals, from the token table (never from the wire). */
  decimals: number;
  /** Price in micro-USD at a $1 peg, rounded up to a whole micro-dollar. */
  amountMicros: bigint;
  x402?: X402Details;
  mpp?: MppDetails;
};

export type X402Details = {
  version: 1 | 2;
  /** The chosen `accepts[i]` exactly as received: a v2 payment echoes it verbatim as `accepted`. */
  accepted: Record<string, unknown>;
  /** The v2 challenge's top-level `resource` object, echoed in the payment when present. */
  resource: Record<string, unknown> | undefined;
  /** EIP-712 domain of the token, from the requirement's `extra`. */
  domainName: string;
  domainVersion: string;
  maxTimeoutSeconds: number;
};

export type MppChallengeParams = {
  id: string;
  realm: string;
  method: string;
  intent: string;
  /** The `request` auth-param exactly as received (base64url JCS); echoed unchanged. */
  request: string;
  expires?: string;
  digest?: string;
  opaque?: string;
  description?: string;
  /** mppx extension: header to send the credential in instead of Authorization. */
  header?: string;
};

export type MppChargeRequest = {
  amount: string;
  currency: Address;
  recipient: Address;
  methodDetails: {
    chainId: number;
    feePayer?: boolean;
    memo?: Hex;
    splits?: Array<{ amount: string; recipient: Address; memo?: Hex }>;
    supportedModes?: string[];
  };
};

export type MppDetails = {
  challenge: MppChallengeParams;
  /** The decoded `request`. */
  request: MppChargeRequest;
};

/** A probe's answer as the parsers need it. Header names are lowercase; repeated headers are joined with ", ". */
export type ProbeResult = {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** The final URL after any (checked) redirects. */
  url: string;
};

/** What the agent must send to the paywall to present a payment. */
export type PaymentHeader = { name: string; value: string };
