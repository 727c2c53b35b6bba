import { randomHex32 } from './randomNonce.js';
import { isAddressEqual, type Address, type Hex } from 'viem';
import { DomainError, invalidArgument } from '../domain/errors.js';
import type { Offer, PaymentHeader, X402Details } from '../paywalls/offer.js';
import { MAX_SIGNED_VALIDITY_SECONDS } from './boundedValidity.js';
import type { SignJob, SignOutput } from './signJobs.js';

/**
 * x402 `exact` payments over EIP-3009 (x402.md §3, §5, §6): one TransferWithAuthorization on the
 * offer's token for exactly the required amount, wrapped in the header the challenge's version
 * expects. Built at signing time so the validity window starts when the signature is made.
 */

/** What was authorized, in the same shape as a direct `eip3009` payment's record. */
export type X402Authorization = {
  from: Address; to: Address; value: string; validAfter: string; validBefore: string; nonce: Hex;
  token: Address; domainName: string; domainVersion: string; chainId: number;
};

/** The finished payment: the header to send to the paywall and the record of what was signed. */
export type X402Payment = { header: PaymentHeader; signature: Hex; authorization: X402Authorization };

/** Prepared signing work plus how to turn the signer's output into the payment header. */
export type PreparedX402Payment = { job: SignJob; finish: (out: SignOutput) => X402Payment };

/** Facilitators refuse validBefore < now + 6; a floor well above that survives clock skew and transit. */
const MIN_VALIDITY_SECONDS = 30;
/** The v1 reference client backdates validAfter by ten minutes against payer/facilitator clock skew. */
const V1_VALID_AFTER_BACKDATE_SECONDS = 600;

/** Echoed requirement fields that must agree with the parsed offer, or the signature would pay something else. */
function assertOfferConsistent(offer: Offer, accepted: Record<string, unknown>, version: 1 | 2): void {
  const amount = accepted[version === 2 ? 'amount' : 'maxAmountRequired'];
  if (typeof amount === 'string' && /^[0-9]+$/.test(amount) && BigInt(amount) !== offer.amountAtomic) {
    throw invalidArgument('x402 offer amount does not match the echoed requirement');
  }
  for (const [field, expected] of [['payTo', offer.payTo], ['asset', offer.asset]] as const) {
    const echoed = accepted[field];
    if (typeof echoed !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(echoed) || !isAddressEqual(echoed as Address, expected)) {
      throw invalidArgument(`x402 offer ${field} does not match the echoed requirement`);
    }
  }
}

/** Standard base64 with padding: the alphabet x402 validators accept (x402.md §11.5). */
function encodeHeaderJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64');
}

/**
 * Refuses an x402 offer no payment can be built from, whatever the treasury and the time: not an
 * `exact` EIP-3009 offer, no token domain, a price that is not positive, an echoed requirement that
 * disagrees. Quote runs it too (app/payments/paywall.ts requirePayableOffer), so that it never reports as
 * allowed a price sign would refuse.
 */
export function checkX402Offer(offer: Offer): X402Details {
  const details = offer.x402;
  if (offer.rail !== 'x402' || !details) throw invalidArgument('offer is not an x402 offer');
  if (offer.scheme !== 'exact') throw new DomainError('unimplemented', `x402 scheme ${offer.scheme ?? '(none)'} not supported yet`);
  const extra = details.accepted.extra as Record<string, unknown> | undefined;
  if (extra?.assetTransferMethod !== undefined && extra.assetTransferMethod !== 'eip3009') {
    throw new DomainError('unimplemented', `x402 asset transfer method ${String(extra.assetTransferMethod)} not supported yet`);
  }
  if (!details.domainName || !details.domainVersion) throw invalidArgument('x402 offer lacks the token EIP-712 domain');
  if (offer.amountAtomic <= 0n) throw invalidArgument('x402 amount must be a positive integer');
  assertOfferConsistent(offer, details.accepted, details.version);
  return details;
}

/**
 * Builds the EIP-3009 job for an x402 `exact` offer and the finisher that wraps its signature in
 * `X-PAYMENT` (v1) or `PAYMENT-SIGNATURE` (v2). `nowSeconds` anchors the validity window.
 */
export function prepareX402Payment(orgId: string, treasury: Address, offer: Offer, nowSeconds: number): PreparedX402Payment {
  const details = checkX402Offer(offer);
  if (!Number.isSafeInteger(nowSeconds) || nowSeconds <= 0) throw new DomainError('internal', 'nowSeconds must be a Unix time in whole seconds');

  const timeout = Number.isFinite(details.maxTimeoutSeconds) ? Math.floor(details.maxTimeoutSeconds) : 0;
  // maxTimeoutSeconds is the longest the paywall accepts, not a length it demands: a longer value
  // is clamped to the direct types' 86,400 s, so a paywall cannot make a signature live for years.
  const validBefore = BigInt(nowSeconds + Math.min(Math.max(timeout, MIN_VALIDITY_SECONDS), MAX_SIGNED_VALIDITY_SECONDS));
  // 2.27.0 v2 clients send 0; the v1 client backdates. Both satisfy validAfter ≤ now.
  const validAfter = details.version === 2 ? 0n : BigInt(Math.max(0, nowSeconds - V1_VALID_AFTER_BACKDATE_SECONDS));
  const domain = { name: details.domainName, version: details.domainVersion, chainId: offer.chainId, verifyingContract: offer.asset };
  const message = { from: treasury, to: offer.payTo, value: offer.amountAtomic, validAfter, validBefore, nonce: randomHex32() };

  return {
    job: { kind: 'eip3009', orgId, domain, message },
    finish: (out) => {
      const wireAuthorization = {
        from: treasury, to: offer.payTo, value: message.value.toString(), validAfter: validAfter.toString(),
        validBefore: validBefore.toString(), nonce: message.nonce,
      };
      const header: PaymentHeader = details.version === 2
        ? {
            name: 'PAYMENT-SIGNATURE',
            value: encodeHeaderJson({
              x402Version: 2,
              ...(details.resource === undefined ? {} : { resource: details.resource }),
              // Servers match this against their own requirements field by field: never rebuild it.
              accepted: details.accepted,
              payload: { authorization: wireAuthorization, signature: out.signature },
            }),
          }
        : {
            name: 'X-PAYMENT',
            value: encodeHeaderJson({
              x402Version: 1,
              scheme: details.accepted.scheme ?? offer.scheme,
              network: details.accepted.network ?? offer.network,
              payload: { signature: out.signature, authorization: wireAuthorization },
            }),
          };
      return {
        header,
        signature: out.signature,
        authorization: {
          ...wireAuthorization, token: offer.asset, domainName: details.domainName, domainVersion: details.domainVersion, chainId: offer.chainId,
        },
      };
    },
  };
}
