import type { Address, Hex } from 'viem';
import type { Eip3009Domain, Eip3009Message, Permit2Message } from './typedData.js';

/** Work the signing threads accept. Plain data only: it crosses a worker boundary. */
export type SignJob =
  | { kind: 'eip3009'; orgId: string; domain: Eip3009Domain; message: Eip3009Message }
  | { kind: 'permit2'; orgId: string; chainId: number; permit2: Address; message: Permit2Message }
  | { kind: 'eip1559'; orgId: string; tx: Eip1559Fields }
  | { kind: 'tempo'; orgId: string; tx: TempoFields };

export type Eip1559Fields = {
  chainId: number;
  nonce: number;
  to: Address;
  data: Hex;
  gas: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
};

/**
 * An unsigned Tempo transaction (type 0x76) as paypolicy builds it: calls only, no access list,
 * authorizations or key authorization. Gas prices are in attodollars (10^-18 USD) per gas.
 */
export type TempoFields = {
  chainId: number;
  calls: Array<{ to: Address; data: Hex }>;
  nonceKey: bigint;
  nonce: bigint;
  /** Unix seconds after which the chain refuses the transaction. */
  validBefore: number;
  gas: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  /** TIP-20 token that pays the fee; absent when the recipient's side sponsors fees. */
  feeToken?: Address;
  /** Fee payer co-signs: the sender commits to no fee token and hands off a 0x78 envelope. */
  sponsored: boolean;
};

export type SignOutput = {
  /** 65-byte r ‖ s ‖ v signature (v = 27 + recovery id). */
  signature: Hex;
  /** Signed serialized transaction and its hash, for transaction jobs. */
  serialized?: Hex;
  hash?: Hex;
};

export type WorkerRequest =
  | { type: 'key'; orgId: string; privateKey: Hex }
  | { type: 'jobs'; jobs: Array<{ id: number; job: SignJob }> }
  /** Answer what came before, then let the thread end on its own (see SignerPool.close). */
  | { type: 'stop' };

export type WorkerResponse = {
  type: 'results';
  results: Array<{ id: number; ok: true; output: SignOutput } | { id: number; ok: false; error: string }>;
};
