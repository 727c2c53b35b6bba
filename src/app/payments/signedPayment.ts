import { encodeFunctionData, erc20Abi, type Address, type Hex } from 'viem';
import { checksumAddress } from '../../domain/address.js';
import { DomainError } from '../../domain/errors.js';
import { microsToAtomic } from '../../domain/money.js';
import { requestJson, type DirectPayload, type PaymentRequest, type PaymentType } from '../../domain/paymentRequest.js';
import type { SignJob, SignOutput } from '../../signing/signJobs.js';
import type { PaymentHeader } from '../../paywalls/offer.js';
import { randomHex32 } from '../../signing/randomNonce.js';
import { PERMIT2_ADDRESS, USDC, X402_EXACT_PERMIT2_PROXY } from '../../signing/tokens.js';

/**
 * What is signed for each direct type, and the record of it that callers receive. Built at signing
 * time (after an approval, too), so validity windows start when the signature is made.
 */

export type SignedPayment =
  | { type: 'eip3009'; signature: Hex; authorization: Eip3009Record }
  | {
      type: 'permit2';
      signature: Hex;
      permit2: {
        owner: Address; token: Address; amount: string; spender: Address; nonce: string; deadline: string; to: Address;
        validAfter: string; permit2Address: Address; chainId: number;
      };
    }
  | { type: 'raw_transaction'; rawTransaction: { serialized: Hex; hash: Hex; nonce: string; token: Address; chainId: number } }
  | { type: 'x402'; signature: Hex; authorization: Eip3009Record; paymentHeader: PaymentHeader }
  | { type: 'mpp'; transactionHash: Hex; paymentHeader: PaymentHeader };

/** The signed EIP-3009 authorization as callers receive it. */
export type Eip3009Record = {
  from: Address; to: Address; value: string; validAfter: string; validBefore: string; nonce: Hex;
  token: Address; domainName: string; domainVersion: string; chainId: number;
};

/** The part of a request kept in the ledger so it can be signed later (after an approval). */
export type StoredRequest = { type: PaymentType; chainId: number; recipient: string; amountMicros: string; payload: DirectPayload };

export function storeRequest(r: PaymentRequest): string {
  return requestJson({ type: r.type, chainId: r.chainId, recipient: r.recipient, amountMicros: r.amountMicros.toString(), payload: r.payload }, r.payload);
}

export function loadRequest(json: string): StoredRequest {
  return storedRequestOf(JSON.parse(json) as StoredRequest);
}

/** A parsed `request` column with its big integers restored (raw transaction fees are JSON strings). */
export function storedRequestOf(parsed: StoredRequest): StoredRequest {
  const r = { ...parsed };
  if (r.payload.kind === 'raw_transaction') {
    r.payload = { kind: 'raw_transaction', gas: BigInt(r.payload.gas), maxFeePerGas: BigInt(r.payload.maxFeePerGas), maxPriorityFeePerGas: BigInt(r.payload.maxPriorityFeePerGas) };
  }
  return r;
}

/** Prepared signing work plus how to turn the signer's output into the caller's record. */
export type PreparedSignature = { job: SignJob; finish: (out: SignOutput) => SignedPayment };

function randomUint256(): bigint {
  return BigInt(randomHex32());
}

/**
 * Builds the job for one direct payment. `nowSeconds` anchors validity windows; `nonce` is the
 * account nonce reserved for raw transactions inside the reserving write transaction.
 */
export function prepareSignature(orgId: string, treasury: Address, r: StoredRequest, nowSeconds: number, nonce?: number): PreparedSignature {
  const token = USDC[r.chainId];
  if (!token) throw new DomainError('internal', `no token for chain ${r.chainId}`);
  const to = checksumAddress(r.recipient);
  const value = microsToAtomic(BigInt(r.amountMicros), token.decimals);
  const p = r.payload;
  if (r.type === 'eip3009' && p.kind === 'authorization') {
    const message = { from: treasury, to, value, validAfter: 0n, validBefore: BigInt(nowSeconds + p.validForSeconds), nonce: randomHex32() };
    const domain = { name: token.name, version: token.version, chainId: token.chainId, verifyingContract: token.address };
    return {
      job: { kind: 'eip3009', orgId, domain, message },
      finish: (out) => ({
        type: 'eip3009',
        signature: out.signature,
        authorization: {
          from: treasury, to, value: value.toString(), validAfter: '0', validBefore: message.validBefore.toString(), nonce: message.nonce,
          token: token.address, domainName: token.name, domainVersion: token.version, chainId: token.chainId,
        },
      }),
    };
  }
  if (r.type === 'permit2' && p.kind === 'authorization') {
    const message = {
      permitted: { token: token.address, amount: value }, spender: X402_EXACT_PERMIT2_PROXY, nonce: randomUint256(),
      deadline: BigInt(nowSeconds + p.validForSeconds), witness: { to, validAfter: 0n },
    };
    return {
      job: { kind: 'permit2', orgId, chainId: r.chainId, permit2: PERMIT2_ADDRESS, message },
      finish: (out) => ({
        type: 'permit2',
        signature: out.signature,
        permit2: {
          owner: treasury, token: token.address, amount: value.toString(), spender: X402_EXACT_PERMIT2_PROXY,
          nonce: message.nonce.toString(), deadline: message.deadline.toString(), to, validAfter: '0',
          permit2Address: PERMIT2_ADDRESS, chainId: r.chainId,
        },
      }),
    };
  }
  if (r.type === 'raw_transaction' && p.kind === 'raw_transaction' && nonce !== undefined) {
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, value] });
    return {
      job: {
        kind: 'eip1559', orgId,
        tx: { chainId: r.chainId, nonce, to: token.address, data, gas: p.gas, maxFeePerGas: p.maxFeePerGas, maxPriorityFeePerGas: p.maxPriorityFeePerGas },
      },
      finish: (out) => ({
        type: 'raw_transaction',
        rawTransaction: { serialized: out.serialized!, hash: out.hash!, nonce: String(nonce), token: token.address, chainId: r.chainId },
      }),
    };
  }
  throw new DomainError('internal', `cannot prepare a ${r.type} signature`);
}

/** The wire's `signature` field: the EIP-3009 or Permit2 signature, null for transactions. */
export function signatureOf(s: SignedPayment): Hex | null {
  return s.type === 'raw_transaction' || s.type === 'mpp' ? null : s.signature;
}
