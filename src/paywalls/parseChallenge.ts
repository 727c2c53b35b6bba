import type { DomainError } from '../domain/errors.js';
import type { Offer, ProbeResult } from './offer.js';
import { parseMppChallenges, selectMppOffer } from './mppChallenge.js';
import { moreSpecificError, noChallengeError, type OfferOutcome } from './offerOutcome.js';
import { decodeX402Challenge, selectX402Offer } from './x402Challenge.js';

/**
 * Parses and prices the payment challenge of a 402 probe (the caller has already checked the
 * status). Detection order: `payment-required` header (x402 v2), else a JSON body with
 * `x402Version: 1` (x402 v1), else `WWW-Authenticate: Payment` (MPP). Throws DomainError
 * `invalid_argument` with the quote-400 reason text when no offer is payable.
 */
export function parsePaymentChallenge(probe: ProbeResult, now: Date): Offer {
  const x402Challenge = decodeX402Challenge(probe);
  const x402 = x402Challenge === null ? null : selectX402Offer(x402Challenge);
  // Precedence when one 402 offers both rails (mppx has x402 interop): x402 wins when it yields
  // a payable offer, following the documented detection order so the same 402 always quotes the
  // same offer. An unpayable x402 challenge does not hide a payable MPP one: the paywall offered
  // both, and either settles the request.
  if (x402?.ok) return x402.offer;

  const header = Object.hasOwn(probe.headers, 'www-authenticate') ? probe.headers['www-authenticate'] : undefined;
  const mpp = typeof header === 'string' ? selectMppOffer(parseMppChallenges(header), now) : null;
  if (mpp?.ok) return mpp.offer;

  throw refusal(x402, mpp);
}

/** The most specific refusal of the two rails; x402's wins a tie, matching detection order. */
function refusal(x402: OfferOutcome | null, mpp: OfferOutcome | null): DomainError {
  const errors = [x402, mpp].flatMap((o) => (o !== null && !o.ok ? [o.error] : []));
  if (errors.length === 0) return noChallengeError();
  return errors.reduce(moreSpecificError);
}
