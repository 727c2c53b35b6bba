import { encodeFunctionData, erc20Abi, type Address, type Hex } from 'viem';
import { checksumAddress } from '../../domain/address.js';
import { DomainError, invalidArgument } from '../../domain/errors.js';
import { microsToAtomic } from '../../domain/money.js';
import { requestJson, type DirectPayload, type PaymentRequest, type PaymentType } from '../../domain/paymentRequest.js';
import type { ApiKeyMode } from '../../domain/types.js';
import type { SignJob, SignOutput } from '../../signing/signJobs.js';
import type { PaymentHeader } from '../../paywalls/offer.js';
import { randomHex32 } from '../../signing/randomNonce.js';
import { PERMIT2_ADDRESS, USDC, X402_EXACT_PERMIT2_PROXY } from '../../signing/tokens.js';
import type { AppDeps } from '../deps.js';
import { assertBoundedValidity } from '../../signing/boundedValidity.js';
import { DEFAULT_TEMPO_FEES, prepareMppPayment, type TempoFees } from '../../signing/tempo.js';
import { prepareX402Payment } from '../../signing/x402Payment.js';
import { offerFromJson } from './paywall.js';

/**
 * What is signed for each payment type, and the record of it that callers receive: the ledger's
 * `request` column is turned into one signing job (direct types from their fields, x402 and mpp
 * from the offer of the live challenge). Built at signing time (after an approval, too), so
 * validity windows start when the signature is made.
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

/** A paywall payment as kept in the ledger: the request plus the offer it was decided on. */
export type StoredPaywallRequest = {
  type: 'x402' | 'mpp';
  chainId: number;
  recipient: string;
  amountMicros: string;
  payload: { kind: 'paywall'; resourceUrl: string; method: 'GET' | 'POST' };
  offer: unknown;
};

/** A ledger `request` column parsed once, for the steps of one signing that each read it. */
export type ParsedStored = StoredPaywallRequest | StoredRequest;

export function parseStored(stored: string): ParsedStored {
  return JSON.parse(stored) as ParsedStored;
}

/** The offer of a stored MPP request, whose Tempo fees must be looked up before signing. */
export function storedMppOffer(parsed: ParsedStored) {
  return parsed.payload.kind === 'paywall' && parsed.type === 'mpp' ? offerFromJson((parsed as StoredPaywallRequest).offer) : undefined;
}

export function isPaywallRequest(stored: string): boolean {
  return (JSON.parse(stored) as { payload: { kind: string } }).payload.kind === 'paywall';
}

/**
 * Builds the signing job for any stored request: the direct types from their fields, x402 and
 * mpp from the offer parsed out of the live challenge. Every job's validity window is checked
 * against the one bound (MAX_SIGNED_VALIDITY_SECONDS) before it can reach the signer.
 */
export function preparePayment(deps: Pick<AppDeps, 'validityNow'>, orgId: string, treasury: Address, stored: ParsedStored, nonce?: number, fees: TempoFees = DEFAULT_TEMPO_FEES): PreparedSignature {
  // One reading of the validity clock (the earlier of wall and ledger) anchors every window and its check.
  const nowMs = deps.validityNow();
  const prepared = buildPayment(orgId, treasury, stored, nowMs, nonce, fees);
  assertBoundedValidity(prepared.job, Math.floor(nowMs / 1000));
  return prepared;
}

function buildPayment(orgId: string, treasury: Address, parsed: ParsedStored, nowMs: number, nonce: number | undefined, fees: TempoFees): PreparedSignature {
  if (parsed.payload.kind !== 'paywall') return prepareSignature(orgId, treasury, storedRequestOf(parsed as StoredRequest), Math.floor(nowMs / 1000), nonce);
  const offer = offerFromJson((parsed as StoredPaywallRequest).offer);
  if (parsed.type === 'x402') {
    const p = prepareX402Payment(orgId, treasury, offer, Math.floor(nowMs / 1000));
    return {
      job: p.job,
      finish: (out) => {
        const r = p.finish(out);
        return { type: 'x402', signature: out.signature, authorization: r.authorization, paymentHeader: r.header };
      },
    };
  }
  if (parsed.type === 'mpp') {
    const p = prepareMppPayment(orgId, treasury, offer, nowMs, fees);
    return {
      job: p.job,
      finish: (out) => {
        const r = p.finish(out);
        return { type: 'mpp', transactionHash: r.transactionHash, paymentHeader: r.header };
      },
    };
  }
  throw new DomainError('internal', `cannot prepare a ${parsed.type} payment`);
}

/**
 * A raw transaction carries no expiry: whoever holds it can broadcast it whenever they like, so a
 * handful signed days apart could all land in one minute, outside every cap window. A live key's
 * raw transaction is therefore signed only where paypolicy broadcasts it itself (an RPC endpoint
 * for its chain). Test keys still receive theirs to broadcast on their own.
 */
export function requireBroadcast(deps: Pick<AppDeps, 'submitter'>, mode: ApiKeyMode, chainId: number): void {
  if (mode === 'test' || deps.submitter.broadcasts(chainId)) return;
  throw invalidArgument(
    `raw_transaction is signed for ak_live_ keys only when paypolicy broadcasts it, and this server has no RPC endpoint for chain ${chainId} (start it with --rpc-url ${chainId}=URL)`,
    'raw_transaction_not_broadcast',
  );
}
