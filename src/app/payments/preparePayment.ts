import type { Address } from 'viem';
import { DomainError } from '../../domain/errors.js';
import { assertBoundedValidity } from '../../signing/boundedValidity.js';
import { DEFAULT_TEMPO_FEES, prepareMppPayment, type TempoFees } from '../../signing/tempo.js';
import { prepareX402Payment } from '../../signing/x402Payment.js';
import type { AppDeps } from '../deps.js';
import { offerFromJson } from './paywall.js';
import { prepareSignature, storedRequestOf, type PreparedSignature, type StoredRequest } from './signedPayment.js';

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
