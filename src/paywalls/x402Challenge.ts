import type { DomainError } from '../domain/errors.js';
import type { Offer, ProbeResult } from './offer.js';
import {
  atomicToMicrosRoundedUp,
  cannotPriceError,
  describeAddress,
  describeWireValue,
  isJsonObject,
  type OfferOutcome,
  ownField,
  parseAtomicAmount,
  parseEvmAddress,
  parseJsonBytes,
  pickOutcome,
  unsupportedNetworkError,
} from './offerOutcome.js';
import { keepable } from './oversizedOffer.js';
import { findX402Stablecoin, isX402PayableChain, resolveX402ChainId } from './tokens.js';

/*
 * x402 challenge detection and pricing (shared/protocols/x402.md §1, §2, §4, §9–11).
 *
 * Strictness is split in two levels. The envelope (version, `accepts` array, v2 `resource`) must
 * have exactly the documented types or the whole challenge is "not x402". Each `accepts[i]` is
 * then checked on its own: a malformed entry is skipped rather than poisoning its siblings, since
 * only the chosen entry is ever echoed back to the server.
 */

/** An x402 challenge whose envelope parsed; `accepts` entries are still unvalidated wire JSON. */
export type X402Challenge = {
  version: 1 | 2;
  /** v2 only: the top-level `resource` object, kept verbatim for the payment to echo. */
  resource: Record<string, unknown> | undefined;
  accepts: readonly unknown[];
};

// Real challenges are a few hundred bytes; Node and undici cap all headers at 16 KiB by default.
// The bound keeps a hostile paywall from making the parser decode megabytes.
const MAX_HEADER_CHARS = 64 * 1024;
const MAX_BODY_BYTES = 256 * 1024;

const BASE64_STANDARD = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Detects an x402 challenge in a 402 probe: the `payment-required` header (v2) first, else a JSON
 * body with `x402Version: 1` (v1). Returns null when neither parses.
 */
export function decodeX402Challenge(probe: ProbeResult): X402Challenge | null {
  const header = ownHeader(probe, 'payment-required');
  // A v2 header that does not parse falls through to the body: a server never sends both
  // versions, so reading v1 from the body cannot contradict a valid v2 header.
  const v2 = header === undefined ? null : decodeV2Header(header);
  return v2 ?? decodeV1Body(probe.body);
}

/**
 * Chooses the payable requirement of a decoded challenge: the first `exact` entry on a known
 * stablecoin that carries an EIP-3009 domain and is small enough to keep (oversizedOffer.ts). Otherwise returns the most specific refusal, or null
 * when no entry is well-formed enough to count as an offer.
 */
export function selectX402Offer(challenge: X402Challenge): OfferOutcome | null {
  return pickOutcome(challenge.accepts.map((entry) => keepable(evaluateRequirement(challenge, entry))));
}

function ownHeader(probe: ProbeResult, name: string): string | undefined {
  const value = Object.hasOwn(probe.headers, name) ? probe.headers[name] : undefined;
  return typeof value === 'string' ? value : undefined;
}

function decodeV2Header(value: string): X402Challenge | null {
  const text = value.trim();
  if (text.length > MAX_HEADER_CHARS || !BASE64_STANDARD.test(text)) return null;
  // Lenient about padding (some encoders drop it) but not about its amount.
  const unpadded = text.replace(/=+$/, '');
  if (unpadded.length % 4 === 1) return null;
  if (unpadded.length !== text.length && text.length % 4 !== 0) return null;
  const json = parseJsonBytes(Buffer.from(unpadded, 'base64'));
  if (!isJsonObject(json) || ownField(json, 'x402Version') !== 2) return null;
  const accepts = ownField(json, 'accepts');
  if (!Array.isArray(accepts) || accepts.length === 0) return null;
  if (!isOptionalString(ownField(json, 'error'))) return null;
  const resource = ownField(json, 'resource');
  if (resource === undefined || resource === null) return { version: 2, resource: undefined, accepts };
  if (!isResourceInfo(resource)) return null;
  return { version: 2, resource, accepts };
}

function decodeV1Body(body: Buffer): X402Challenge | null {
  if (body.length === 0 || body.length > MAX_BODY_BYTES) return null;
  const json = parseJsonBytes(body);
  if (!isJsonObject(json) || ownField(json, 'x402Version') !== 1) return null;
  const accepts = ownField(json, 'accepts');
  if (!Array.isArray(accepts) || accepts.length === 0) return null;
  if (!isOptionalString(ownField(json, 'error'))) return null;
  return { version: 1, resource: undefined, accepts };
}

function isResourceInfo(value: unknown): value is Record<string, unknown> {
  if (!isJsonObject(value)) return false;
  const url = ownField(value, 'url');
  return typeof url === 'string' && url !== '' && isOptionalString(ownField(value, 'description')) && isOptionalString(ownField(value, 'mimeType'));
}

/** Absent, null or a string: the optional-string fields of the x402 schemas. */
function isOptionalString(value: unknown): boolean {
  return value === undefined || value === null || typeof value === 'string';
}

function isNonEmptyString(value: unknown): value is string {
  return typeof value === 'string' && value !== '';
}

/** The fields of one requirement after type checks, before any pricing decision. */
type Requirement = {
  entry: Record<string, unknown>;
  scheme: string;
  network: string;
  amountText: string;
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra: Record<string, unknown> | undefined;
};

/** Type-checks one `accepts[i]`; null when any field has the wrong type. */
function readRequirement(version: 1 | 2, entry: unknown): Requirement | null {
  if (!isJsonObject(entry)) return null;
  const scheme = ownField(entry, 'scheme');
  const network = ownField(entry, 'network');
  const amountText = ownField(entry, version === 2 ? 'amount' : 'maxAmountRequired');
  const asset = ownField(entry, 'asset');
  const payTo = ownField(entry, 'payTo');
  const maxTimeoutSeconds = ownField(entry, 'maxTimeoutSeconds');
  const extra = ownField(entry, 'extra');
  if (!isNonEmptyString(scheme) || !isNonEmptyString(network) || !isNonEmptyString(amountText)) return null;
  if (!isNonEmptyString(asset) || !isNonEmptyString(payTo)) return null;
  // An integral timeout: validBefore = now + maxTimeoutSeconds must stay a whole second.
  if (typeof maxTimeoutSeconds !== 'number' || !Number.isSafeInteger(maxTimeoutSeconds) || maxTimeoutSeconds <= 0) return null;
  if (extra !== undefined && extra !== null && !isJsonObject(extra)) return null;
  if (isJsonObject(extra)) {
    // Only the EIP-3009 keys are read; other `extra` keys belong to other schemes.
    for (const key of ['name', 'version', 'assetTransferMethod']) {
      const v = ownField(extra, key);
      if (v !== undefined && typeof v !== 'string') return null;
    }
  }
  if (version === 1) {
    if (!isNonEmptyString(ownField(entry, 'resource'))) return null;
    if (typeof ownField(entry, 'description') !== 'string') return null;
    if (!isOptionalString(ownField(entry, 'mimeType'))) return null;
  }
  return {
    entry,
    scheme,
    network,
    amountText,
    asset,
    payTo,
    maxTimeoutSeconds,
    extra: isJsonObject(extra) ? extra : undefined,
  };
}

const LEGACY_DECIMAL = /^([0-9]{1,78})\.([0-9]+)$/;

/**
 * Parses a requirement's amount. v2 amounts are integers. Legacy x402 1.2.0 computed v1 amounts
 * in floating point (`"$1.005"` → `"1004999.9999999999"`), so a v1 fraction is rounded UP to the
 * next whole atomic unit: the price is never understated, and a legacy facilitator (value ≥
 * required) accepts the rounded value. Never goes through Number.
 */
function parseRequirementAmount(version: 1 | 2, text: string): bigint | undefined {
  const whole = parseAtomicAmount(text);
  if (whole !== undefined || version === 2) return whole;
  const m = LEGACY_DECIMAL.exec(text);
  if (!m) return undefined;
  const integer = parseAtomicAmount(m[1]);
  if (integer === undefined) return undefined;
  const rounded = /[1-9]/.test(m[2]!) ? integer + 1n : integer;
  return parseAtomicAmount(rounded.toString());
}

/** Prices one `accepts[i]`: an Offer, a refusal, or null when the entry is malformed. */
function evaluateRequirement(challenge: X402Challenge, raw: unknown): Offer | DomainError | null {
  const req = readRequirement(challenge.version, raw);
  if (req === null) return null;
  const amountAtomic = parseRequirementAmount(challenge.version, req.amountText);
  if (amountAtomic === undefined) return null;
  const network = describeWireValue(req.network);

  const chainId = resolveX402ChainId(req.network);
  if (chainId === undefined || !isX402PayableChain(chainId)) return unsupportedNetworkError(req.network);
  const payTo = parseEvmAddress(req.payTo);
  if (payTo === undefined) return null;
  if (req.scheme !== 'exact') return cannotPriceError(`x402 scheme ${describeWireValue(req.scheme)} on ${network}`);

  const token = findX402Stablecoin(chainId, req.asset);
  const asset = parseEvmAddress(req.asset);
  if (token === undefined || asset === undefined) return cannotPriceError(`asset ${describeAddress(req.asset)} on ${network}`);

  // Only EIP-3009 transferWithAuthorization is signed for x402; Permit2 needs an on-chain
  // allowance first, so such an entry is recognised but refused.
  const domainName = req.extra === undefined ? undefined : ownField(req.extra, 'name');
  const domainVersion = req.extra === undefined ? undefined : ownField(req.extra, 'version');
  const transferMethod = req.extra === undefined ? undefined : ownField(req.extra, 'assetTransferMethod');
  if (transferMethod !== undefined && transferMethod !== 'eip3009') {
    return cannotPriceError(`asset ${asset} on ${network}: only EIP-3009 transfers are supported`);
  }
  if (!isNonEmptyString(domainName) || !isNonEmptyString(domainVersion)) {
    return cannotPriceError(`asset ${asset} on ${network}: no EIP-3009 domain in extra`);
  }

  return {
    rail: 'x402',
    chainId,
    network: req.network,
    scheme: req.scheme,
    realm: null,
    payTo,
    asset,
    amountAtomic,
    decimals: token.decimals,
    amountMicros: atomicToMicrosRoundedUp(amountAtomic, token.decimals),
    x402: {
      version: challenge.version,
      // The very object parsed from the wire: a v2 payment must echo it unchanged.
      accepted: req.entry,
      resource: challenge.resource,
      domainName,
      domainVersion,
      maxTimeoutSeconds: req.maxTimeoutSeconds,
    },
  };
}
