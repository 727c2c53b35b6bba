import { getAddress, type Address } from 'viem';
import { type DomainError, invalidArgument } from '../domain/errors.js';
import { atomicToMicros } from '../domain/money.js';
import type { Offer } from './offer.js';

/*
 * Shared vocabulary of the challenge parsers: the quote-400 reason texts of
 * shared/spec/wire-protocol.md, how specific each one is, and the small value checks both rails
 * need. Every refusal is a DomainError `invalid_argument`; the `code` tells them apart.
 */

/** What one rail's challenge yielded: its first payable offer, or the most specific reason it has none. */
export type OfferOutcome = { ok: true; offer: Offer } | { ok: false; error: DomainError };

/** The reason text when a 402 carries neither format in a form that parses. */
export const NO_CHALLENGE_MESSAGE = 'URL returned 402 but no parseable x402 or MPP challenge.';

/** Neither x402 nor MPP parsed (code `no_challenge`). */
export function noChallengeError(): DomainError {
  return invalidArgument(NO_CHALLENGE_MESSAGE, 'no_challenge');
}

/** A recognised offer whose token, scheme or chain paypolicy cannot price (code `cannot_price`). */
export function cannotPriceError(what: string): DomainError {
  return invalidArgument(`Cannot price ${what}`, 'cannot_price');
}

/** An x402 offer on a network paypolicy has no stablecoin for (code `unsupported_network`). */
export function unsupportedNetworkError(network: string): DomainError {
  return invalidArgument(`Unsupported x402 network ${describeWireValue(network)}`, 'unsupported_network');
}

/** An MPP offer other than tempo/charge; `method` is `stripe` or `tempo/session` (code `unsupported_method`). */
export function unsupportedMethodError(method: string): DomainError {
  return invalidArgument(`MPP method ${describeWireValue(method)} not supported yet`, 'unsupported_method');
}

/** A priceable MPP offer whose `expires` has passed (code `challenge_expired`). */
export function expiredChallengeError(expires: string): DomainError {
  // Kept in the "Cannot price" family of quote reasons; the code says why precisely.
  return invalidArgument(`Cannot price expired MPP challenge (expires ${describeWireValue(expires)})`, 'challenge_expired');
}

// The further an offer got before it failed, the more the caller learns from its reason: an
// expired but otherwise payable offer beats an unpriceable token, which beats an unknown
// network, which beats an unsupported method. Anything recognised beats "no challenge".
const SPECIFICITY: Readonly<Record<string, number>> = {
  no_challenge: 0,
  unsupported_method: 1,
  unsupported_network: 2,
  cannot_price: 3,
  challenge_expired: 4,
};

/** Returns the more specific of two refusals; `a` wins ties, so earlier offers keep precedence. */
export function moreSpecificError(a: DomainError, b: DomainError): DomainError {
  return (SPECIFICITY[b.code] ?? 0) > (SPECIFICITY[a.code] ?? 0) ? b : a;
}

/**
 * Reduces per-offer results, in wire order, to an outcome: the first Offer, else the most
 * specific refusal. `null` entries are malformed offers; when every entry is null the rail is
 * treated as absent and the function returns null.
 */
export function pickOutcome(results: Iterable<Offer | DomainError | null>): OfferOutcome | null {
  let best: DomainError | undefined;
  for (const result of results) {
    if (result === null) continue;
    if (!(result instanceof Error)) return { ok: true, offer: result };
    best = best === undefined ? result : moreSpecificError(best, result);
  }
  return best === undefined ? null : { ok: false, error: best };
}

const MAX_DESCRIBED_CHARS = 80;

/**
 * Makes a wire string safe to put in a reason text, which is sent to callers: printable ASCII
 * only and bounded, because a hostile paywall controls it.
 */
export function describeWireValue(value: string): string {
  const clipped = value.length > MAX_DESCRIBED_CHARS ? `${value.slice(0, MAX_DESCRIBED_CHARS)}...` : value;
  return clipped.replace(/[^\x20-\x7e]/g, '?');
}

const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * Checksums a 0x-prefixed 20-byte hex address, or returns undefined. The wire's letter case is
 * not trusted as a checksum: the bytes are what gets paid, and the spec compares bytes.
 */
export function parseEvmAddress(value: unknown): Address | undefined {
  if (typeof value !== 'string' || !EVM_ADDRESS.test(value)) return undefined;
  return getAddress(value.toLowerCase());
}

/** Names a wire token address in a reason text: checksummed when it is an address, else sanitised. */
export function describeAddress(value: string): string {
  return parseEvmAddress(value) ?? describeWireValue(value);
}

const UINT256_MAX = 2n ** 256n - 1n;
const ATOMIC_INTEGER = /^[0-9]{1,78}$/;

/** Parses a base-10 integer string that fits a uint256; anything else (sign, exponent, dot) is undefined. */
export function parseAtomicAmount(value: unknown): bigint | undefined {
  if (typeof value !== 'string' || !ATOMIC_INTEGER.test(value)) return undefined;
  const amount = BigInt(value);
  return amount <= UINT256_MAX ? amount : undefined;
}

/** Converts atomic units of a USD token to micro-USD, rounding a fraction of a micro-dollar up. */
export function atomicToMicrosRoundedUp(atomic: bigint, decimals: number): bigint {
  const { micros, exact } = atomicToMicros(atomic, decimals);
  return exact ? micros : micros + 1n;
}

/** True for a JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reads an own property only, so `__proto__`-style keys in hostile JSON never reach a prototype. */
export function ownField(obj: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes strict UTF-8 and parses JSON; undefined when either step fails. */
export function parseJsonBytes(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return undefined;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Malformed JSON (or nesting deep enough to exhaust the parser) means "not this format".
    return undefined;
  }
}
