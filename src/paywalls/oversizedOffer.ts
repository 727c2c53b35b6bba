import type { DomainError } from '../domain/errors.js';
import type { Offer } from './offer.js';
import { cannotPriceError, describeWireValue, isJsonObject } from './offerOutcome.js';

/*
 * A chosen offer is kept whole: in the ledger's request column, in the quote cache, and (x402) in
 * the payment header stored as the result, because a payment echoes the paywall's requirement
 * verbatim. The paywall decides what is in it, so without a bound one cent's payment could write
 * whatever a 256 KiB challenge body holds, several times over. Real challenges are a few hundred
 * bytes: an offer past these bounds is refused like any other challenge that cannot be paid.
 */

/** The longest string (value or key) an offer may carry, in characters. */
export const MAX_OFFER_FIELD_CHARS = 4_096;
/** The largest offer as stored (JSON, UTF-8 bytes). */
export const MAX_OFFER_BYTES = 16_384;
/** The deepest nesting of objects and arrays an offer may have. */
export const MAX_OFFER_DEPTH = 16;

const MAX_DESCRIBED_PATH = 3;

/**
 * Why an offer is too large to keep, as a `cannot_price` refusal, or undefined when it fits: no
 * string or key over MAX_OFFER_FIELD_CHARS, no nesting past MAX_OFFER_DEPTH, and at most
 * MAX_OFFER_BYTES as JSON. Walks without recursion, so hostile nesting cannot exhaust the stack.
 */
export function oversizedOffer(offer: Offer): DomainError | undefined {
  // Every string of an offer is one of these wire objects' or derived from one, so walking them
  // checks every field under the name the paywall gave it.
  const pending: Array<{ value: unknown; path: readonly string[] }> = [
    { value: offer.x402?.accepted, path: [] },
    { value: offer.x402?.resource, path: ['resource'] },
    { value: offer.mpp?.challenge, path: [] },
    { value: offer.mpp?.request, path: ['request'] },
  ];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, path } = next;
    if (typeof value === 'string') {
      if (value.length > MAX_OFFER_FIELD_CHARS) return fieldTooLong(path);
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (path.length >= MAX_OFFER_DEPTH) return cannotPriceError(`a challenge nested more than ${MAX_OFFER_DEPTH} levels deep`);
    const children = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : isJsonObject(value) ? Object.entries(value) : [];
    for (const [key, child] of children) {
      if (key.length > MAX_OFFER_FIELD_CHARS) return fieldTooLong(path);
      pending.push({ value: child, path: [...path, key] });
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(offer, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
  if (bytes > MAX_OFFER_BYTES) return cannotPriceError(`a challenge of more than ${MAX_OFFER_BYTES} bytes (${bytes})`);
  return undefined;
}

/** One priced entry of a challenge, or its `oversizedOffer` refusal: a sibling that fits may still be chosen. */
export function keepable(result: Offer | DomainError | null): Offer | DomainError | null {
  return result === null || result instanceof Error ? result : oversizedOffer(result) ?? result;
}

/** Names the field by its last few keys, sanitised: they come from the paywall. */
function fieldTooLong(path: readonly string[]): DomainError {
  const shown = path.slice(-MAX_DESCRIBED_PATH).map(describeWireValue).join('.');
  return cannotPriceError(`a challenge with a field of more than ${MAX_OFFER_FIELD_CHARS} characters${shown === '' ? '' : ` (${shown})`}`);
}
