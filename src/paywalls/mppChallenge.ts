import type { Address, Hex } from 'viem';
import type { DomainError } from '../domain/errors.js';
import type { MppChallengeParams, MppChargeRequest, Offer } from './offer.js';
import {
  atomicToMicrosRoundedUp,
  cannotPriceError,
  describeAddress,
  expiredChallengeError,
  isJsonObject,
  type OfferOutcome,
  ownField,
  parseAtomicAmount,
  parseEvmAddress,
  parseJsonBytes,
  pickOutcome,
  unsupportedMethodError,
} from './offerOutcome.js';
import { keepable } from './oversizedOffer.js';
import { findTempoUsdToken, TEMPO_NETWORKS } from './tokens.js';

/*
 * MPP challenge parsing and pricing (shared/protocols/mpp.md §1, §2, §4, §5, §12).
 *
 * A 402 may carry several challenges, possibly merged into one `WWW-Authenticate` value with
 * ", " and mixed with other schemes. The value is split into challenges the RFC 9110 way: list
 * elements are separated by commas outside quoted strings, and an element that is a token NOT
 * followed by "=" starts a new challenge. A malformed challenge is dropped on its own so that
 * its well-formed neighbours still count (mppx's list parser throws on the first bad one).
 */

/** One challenge of a `WWW-Authenticate` value; `params` is null when its auth-params are malformed. */
export type AuthChallenge = {
  scheme: string;
  /** Lowercased parameter names to unescaped values. */
  params: ReadonlyMap<string, string> | null;
};

/** A well-formed `Payment` challenge: its auth-params and its decoded (not yet validated) `request`. */
export type MppChallenge = {
  params: MppChallengeParams;
  request: Record<string, unknown>;
};

// Far above any real header (Node and undici cap all headers at 16 KiB); bounds the work a
// hostile paywall can cause.
const MAX_HEADER_CHARS = 64 * 1024;
// mppx rejects a larger `request`; the bound is applied to the encoded text.
const MAX_REQUEST_CHARS = 16 * 1024;

const TOKEN_START = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+/;
// A quoted-string allows any char but CTLs (other than HTAB), `"` and unescaped `\`. Each
// alternative is one char, so the match is linear even on hostile input.
const AUTH_PARAM =
  /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+)[ \t]*=[ \t]*(?:([!#$%&'*+\-.^_`|~0-9A-Za-z]+)|"((?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[^\x00-\x08\x0a-\x1f\x7f])*)")$/;

/** Splits a `WWW-Authenticate` value (several lines may be merged with ", ") into its challenges. */
export function parseAuthChallenges(value: string): AuthChallenge[] {
  if (value.length > MAX_HEADER_CHARS) return [];
  const drafts: { scheme: string; elements: string[]; broken: boolean }[] = [];
  for (const raw of splitListElements(value)) {
    const element = trimOws(raw);
    if (element === '') continue; // RFC 9110 §5.6.1: empty list elements are ignored
    const current = drafts[drafts.length - 1];
    const token = TOKEN_START.exec(element);
    if (token) {
      const rest = element.slice(token[0].length);
      const afterSpace = rest.replace(/^[ \t]+/, '');
      if (afterSpace.startsWith('=')) {
        current?.elements.push(element);
        continue;
      }
      if (rest === '' || afterSpace !== rest) {
        drafts.push({ scheme: token[0], elements: afterSpace === '' ? [] : [afterSpace], broken: false });
        continue;
      }
    }
    // Neither an auth-param nor a scheme: whatever challenge it belongs to is unusable.
    if (current) current.broken = true;
  }
  return drafts.map((d) => ({ scheme: d.scheme, params: d.broken ? null : parseAuthParams(d.elements) }));
}

/** Extracts every well-formed `Payment` challenge from a `WWW-Authenticate` value, in order. */
export function parseMppChallenges(value: string): MppChallenge[] {
  const out: MppChallenge[] = [];
  for (const challenge of parseAuthChallenges(value)) {
    if (challenge.scheme.toLowerCase() !== 'payment' || challenge.params === null) continue;
    const parsed = readPaymentChallenge(challenge.params);
    if (parsed) out.push(parsed);
  }
  return out;
}

/**
 * Chooses the first payable challenge (tempo/charge, a USD Tempo token, a chainId, not
 * expired at `now`, small enough to keep: oversizedOffer.ts). Otherwise returns the most specific refusal, or null when there is none.
 */
export function selectMppOffer(challenges: readonly MppChallenge[], now: Date): OfferOutcome | null {
  return pickOutcome(challenges.map((challenge) => keepable(evaluateChallenge(challenge, now))));
}

/**
 * Strips optional whitespace (SP / HTAB) from both ends. A loop, not `/[ \t]+$/`: that regex is
 * quadratic on a long run of spaces followed by anything else.
 */
function trimOws(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && (text[start] === ' ' || text[start] === '\t')) start++;
  while (end > start && (text[end - 1] === ' ' || text[end - 1] === '\t')) end--;
  return text.slice(start, end);
}

/** Splits at commas outside quoted strings; a backslash inside quotes escapes the next char. */
function splitListElements(value: string): string[] {
  const elements: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') {
      quoted = true;
    } else if (c === ',') {
      elements.push(value.slice(start, i));
      start = i + 1;
    }
  }
  elements.push(value.slice(start));
  return elements;
}

function parseAuthParams(elements: readonly string[]): ReadonlyMap<string, string> | null {
  const params = new Map<string, string>();
  for (const element of elements) {
    const m = AUTH_PARAM.exec(element);
    if (!m) return null;
    const name = m[1]!.toLowerCase();
    // A duplicate makes the challenge ambiguous: which value did the server bind into the id?
    if (params.has(name)) return null;
    params.set(name, m[2] ?? unescapeQuoted(m[3]!));
  }
  return params;
}

/**
 * RFC 9110 quoted-pair unescaping, plus mppx's `\uXXXX` for characters above Latin-1 (mppx
 * doubles every literal backslash, so a `\u` followed by four hex digits is always its escape).
 */
function unescapeQuoted(text: string): string {
  if (!text.includes('\\')) return text;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const next = text[i + 1] ?? '';
    const hex = next === 'u' ? text.slice(i + 2, i + 6) : '';
    if (/^[0-9a-fA-F]{4}$/.test(hex)) {
      out += String.fromCharCode(parseInt(hex, 16));
      i += 5;
    } else {
      out += next;
      i += 1;
    }
  }
  return out;
}

/**
 * Where a credential may go: `Authorization`, or `Payment-Authorization` (mppx's `requiresAuth`).
 * A challenge naming any other header (`Cookie`, say) would have the payer overwrite its own.
 */
const CREDENTIAL_HEADER = /^(?:authorization|payment-authorization)$/i;
const METHOD = /^[a-z][a-z0-9:_-]*$/;
const INTENT = /^[A-Za-z0-9-]+$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})$/;

function readPaymentChallenge(params: ReadonlyMap<string, string>): MppChallenge | null {
  const id = params.get('id');
  const realm = params.get('realm');
  const method = params.get('method');
  const intent = params.get('intent');
  const request = params.get('request');
  if (!id || realm === undefined || !method || !intent || !request) return null;
  if (!METHOD.test(method) || !INTENT.test(intent)) return null;
  const expires = params.get('expires');
  if (expires !== undefined && parseRfc3339(expires) === undefined) return null;
  const decoded = decodeRequest(request);
  if (decoded === undefined) return null;

  const challenge: MppChallengeParams = { id, realm, method, intent, request };
  // Optional params are copied only when present: the credential echoes exactly what was sent.
  for (const key of ['expires', 'digest', 'opaque', 'description', 'header'] as const) {
    const v = params.get(key);
    if (v !== undefined) challenge[key] = v;
  }
  if (challenge.header !== undefined && !CREDENTIAL_HEADER.test(challenge.header)) return null;
  return { params: challenge, request: decoded };
}

function parseRfc3339(text: string): number | undefined {
  if (!RFC3339.test(text)) return undefined;
  const ms = Date.parse(text.toUpperCase());
  return Number.isNaN(ms) ? undefined : ms;
}

/** base64url without padding (as the spec requires) → strict UTF-8 → a JSON object. */
function decodeRequest(request: string): Record<string, unknown> | undefined {
  if (request.length > MAX_REQUEST_CHARS || !BASE64URL.test(request) || request.length % 4 === 1) return undefined;
  const json = parseJsonBytes(Buffer.from(request, 'base64url'));
  return isJsonObject(json) ? json : undefined;
}

const BYTES32 = /^0x[0-9a-fA-F]{64}$/;

/** A validated tempo charge request whose chainId may still be missing, so that its absence can be reported. */
type TempoChargeDraft = Omit<MppChargeRequest, 'methodDetails'> & { methodDetails: Partial<MppChargeRequest['methodDetails']> };
type Splits = NonNullable<MppChargeRequest['methodDetails']['splits']>;

/** Validates the charge request schema (mpp.md §4, §5.2) for tempo; null when any field is wrong. */
function readTempoCharge(json: Record<string, unknown>): TempoChargeDraft | null {
  const amount = ownField(json, 'amount');
  const currency = ownField(json, 'currency');
  const recipient = ownField(json, 'recipient');
  const total = parseAtomicAmount(amount);
  if (total === undefined || typeof currency !== 'string' || typeof recipient !== 'string') return null;
  if (parseEvmAddress(recipient) === undefined || parseEvmAddress(currency) === undefined) return null;
  for (const key of ['description', 'externalId']) {
    const v = ownField(json, key);
    if (v !== undefined && typeof v !== 'string') return null;
  }
  const details = ownField(json, 'methodDetails');
  if (details !== undefined && !isJsonObject(details)) return null;
  const methodDetails: TempoChargeDraft['methodDetails'] = {};
  if (details !== undefined) {
    const chainId = ownField(details, 'chainId');
    if (chainId !== undefined) {
      if (typeof chainId !== 'number' || !Number.isSafeInteger(chainId) || chainId <= 0) return null;
      methodDetails.chainId = chainId;
    }
    const feePayer = ownField(details, 'feePayer');
    if (feePayer !== undefined) {
      if (typeof feePayer !== 'boolean') return null;
      methodDetails.feePayer = feePayer;
    }
    const memo = ownField(details, 'memo');
    if (memo !== undefined) {
      if (typeof memo !== 'string' || !BYTES32.test(memo)) return null;
      methodDetails.memo = memo as Hex;
    }
    const splits = ownField(details, 'splits');
    if (splits !== undefined) {
      const parsed = readSplits(splits, total);
      if (parsed === null) return null;
      methodDetails.splits = parsed;
    }
    const modes = ownField(details, 'supportedModes');
    if (modes !== undefined) {
      if (!Array.isArray(modes) || !modes.every((m) => typeof m === 'string')) return null;
      methodDetails.supportedModes = modes as string[];
    }
  }
  return { amount: amount as string, currency: currency as Address, recipient: recipient as Address, methodDetails };
}

/** Splits must be non-empty, each > 0, and leave the primary recipient something: Σ < amount. */
function readSplits(value: unknown, total: bigint): Splits | null {
  if (!Array.isArray(value) || value.length === 0) return null;
  const splits: Splits = [];
  let sum = 0n;
  for (const item of value) {
    if (!isJsonObject(item)) return null;
    const amount = ownField(item, 'amount');
    const recipient = ownField(item, 'recipient');
    const memo = ownField(item, 'memo');
    const atomic = parseAtomicAmount(amount);
    if (atomic === undefined || atomic === 0n || parseEvmAddress(recipient) === undefined) return null;
    if (memo !== undefined && (typeof memo !== 'string' || !BYTES32.test(memo))) return null;
    sum += atomic;
    const split: (typeof splits)[number] = { amount: amount as string, recipient: recipient as Address };
    if (memo !== undefined) split.memo = memo as Hex;
    splits.push(split);
  }
  return sum < total ? splits : null;
}

/** Prices one challenge: an Offer, a refusal, or null when its request is malformed. */
function evaluateChallenge(challenge: MppChallenge, now: Date): Offer | DomainError | null {
  const { params } = challenge;
  if (params.method !== 'tempo' || params.intent !== 'charge') {
    // The charge intent is shared by every method, so naming the method alone is enough there.
    return unsupportedMethodError(params.intent === 'charge' ? params.method : `${params.method}/${params.intent}`);
  }
  const request = readTempoCharge(challenge.request);
  if (request === null) return null;
  const chainId = request.methodDetails.chainId;
  // The specs disagree on the default chain (42431 vs 4217) and mppx's client picks 4217, so a
  // missing chainId is refused rather than guessed: guessing wrong pays on the wrong chain.
  if (chainId === undefined) return cannotPriceError(`currency ${describeAddress(request.currency)} without methodDetails.chainId`);
  const network = TEMPO_NETWORKS.get(chainId);
  const token = findTempoUsdToken(chainId, request.currency);
  if (network === undefined || token === undefined) {
    return cannotPriceError(`currency ${describeAddress(request.currency)} on chain ${chainId}`);
  }
  if (params.expires !== undefined && parseRfc3339(params.expires)! <= now.getTime()) {
    return expiredChallengeError(params.expires);
  }

  const amountAtomic = BigInt(request.amount);
  return {
    rail: 'mpp',
    chainId,
    network,
    scheme: null,
    realm: params.realm,
    payTo: parseEvmAddress(request.recipient)!,
    asset: token.address,
    amountAtomic,
    decimals: token.decimals,
    amountMicros: atomicToMicrosRoundedUp(amountAtomic, token.decimals),
    mpp: { challenge: params, request: { ...request, methodDetails: { ...request.methodDetails, chainId } } },
  };
}
