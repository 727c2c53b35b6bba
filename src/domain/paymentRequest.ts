import { invalidArgument } from './errors.js';
import { jsonNumberToDecimal, parseUsd } from './money.js';
import type { ApiKeyMode } from './types.js';
import { ADDRESS, AGENT_ID } from './validate.js';

/** Payment types of the wire protocol. */
export const PAYMENT_TYPES = ['eip3009', 'permit2', 'raw_transaction', 'x402', 'mpp'] as const;
export type PaymentType = (typeof PAYMENT_TYPES)[number];
export const DIRECT_TYPES: readonly PaymentType[] = ['eip3009', 'permit2', 'raw_transaction'];

export const DEFAULT_CHAIN_ID = 8453;

/**
 * Chains each key mode may sign on for the direct types. Live keys: Base mainnet only. Test keys:
 * Base mainnet (the wire default) and Base Sepolia, so integrations can run against a testnet.
 */
export const DIRECT_CHAINS: Readonly<Record<ApiKeyMode, readonly number[]>> = {
  live: [8453],
  test: [8453, 84532],
};

/** Bounds of caller-tunable signing parameters. */
export const VALIDITY_SECONDS = { min: 30, max: 86_400, default: 3_600 } as const;
export const RAW_TX_LIMITS = {
  gas: { min: 21_000n, max: 1_000_000n, default: 100_000n },
  /** wei; default 1 gwei ceiling, far above Base's usual fee, refunded when unused. */
  maxFeePerGas: { max: 1_000n * 10n ** 9n, default: 10n ** 9n },
  maxPriorityFeePerGas: { default: 10n ** 6n },
} as const;

export type DirectPayload =
  | { kind: 'authorization'; validForSeconds: number }
  | { kind: 'raw_transaction'; gas: bigint; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };

/** A sign request after validation: every field typed, normalized and bounded. */
export type PaymentRequest = {
  agentId: string;
  type: PaymentType;
  chainId: number;
  /** Lowercased 0x recipient (direct types). */
  recipient: string;
  amountMicros: bigint;
  payload: DirectPayload | { kind: 'paywall'; resourceUrl: string; method: 'GET' | 'POST' };
  /**
   * The caller's ceiling on a paywall's live price (x402 and mpp `payload.max_amount_usd`), in
   * micro-USD; null when none was sent. A higher price is denied before anything is signed.
   */
  maxAmountMicros: bigint | null;
  dryRun: boolean;
  idempotencyKey: string | undefined;
};

/**
 * Raw input as both transports deliver it, before any checks. A field not given is `undefined`;
 * JSON null is a value like any other and is refused where it is not one the field takes (no
 * request field of the wire protocol is nullable, and a null read as "not given" would sign
 * something else than asked: a null type became a raw transaction).
 */
export type PaymentRequestInput = {
  agentId: unknown;
  type: unknown;
  chainId: unknown;
  recipientAddress: unknown;
  /** A decimal string; transports turn JSON numbers into their shortest decimal text first. */
  amountUsd: unknown;
  payload: unknown;
  dryRun: unknown;
  idempotencyKey: unknown;
};

/**
 * The request's Idempotency-Key, given as a body field (REST `idempotency_key`, SignRequest's
 * `idempotency_key`) or as the Idempotency-Key header: either alone, or both when they are equal.
 * Two different keys are refused, since honouring either would charge again a payment the other
 * names. An empty one is refused too (parsePaymentRequest): taken for none, it would make every
 * retry a new payment while the caller believes it is protected.
 */
export function idempotencyKeyOf(field: unknown, header: string | undefined): unknown {
  if (field !== undefined && header !== undefined && field !== header) {
    throw invalidArgument('idempotency_key and the Idempotency-Key header differ', 'invalid_idempotency_key');
  }
  return field !== undefined ? field : header;
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function intField(obj: Record<string, unknown>, field: string, min: number, max: number, dflt: number): number {
  const v = obj[field];
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw invalidArgument(`payload.${field} must be an integer from ${min} to ${max}`);
  }
  return v;
}

function weiField(obj: Record<string, unknown>, field: string, min: bigint, max: bigint, dflt: bigint): bigint {
  const v = obj[field];
  if (v === undefined) return dflt;
  const text = typeof v === 'number' && Number.isSafeInteger(v) ? String(v) : v;
  if (typeof text !== 'string' || !/^\d{1,30}$/.test(text) || BigInt(text) < min || BigInt(text) > max) {
    throw invalidArgument(`payload.${field} must be an integer (decimal string) from ${min} to ${max}`);
  }
  return BigInt(text);
}

/** payload.max_amount_usd: a decimal string or a JSON number, read like amount_usd; absent means none. */
function maxAmountField(raw: Record<string, unknown>): bigint | null {
  const v = raw.max_amount_usd;
  if (v === undefined || v === '') return null;
  const text = typeof v === 'number' && Number.isFinite(v) ? jsonNumberToDecimal(v) : v;
  if (typeof text !== 'string') throw invalidArgument('payload.max_amount_usd must be a number', 'invalid_amount');
  const micros = parseUsd(text, 'payload.max_amount_usd');
  if (micros === 0n) throw invalidArgument('payload.max_amount_usd must be greater than 0', 'invalid_amount');
  return micros;
}

function parseDirectPayload(type: PaymentType, raw: Record<string, unknown>): DirectPayload {
  if (type === 'raw_transaction') {
    const maxFeePerGas = weiField(raw, 'max_fee_per_gas', 1n, RAW_TX_LIMITS.maxFeePerGas.max, RAW_TX_LIMITS.maxFeePerGas.default);
    const priority = weiField(raw, 'max_priority_fee_per_gas', 0n, maxFeePerGas, RAW_TX_LIMITS.maxPriorityFeePerGas.default < maxFeePerGas ? RAW_TX_LIMITS.maxPriorityFeePerGas.default : maxFeePerGas);
    return {
      kind: 'raw_transaction',
      gas: weiField(raw, 'gas', RAW_TX_LIMITS.gas.min, RAW_TX_LIMITS.gas.max, RAW_TX_LIMITS.gas.default),
      maxFeePerGas,
      maxPriorityFeePerGas: priority,
    };
  }
  return { kind: 'authorization', validForSeconds: intField(raw, 'valid_for_seconds', VALIDITY_SECONDS.min, VALIDITY_SECONDS.max, VALIDITY_SECONDS.default) };
}

/**
 * Validates a sign request. Each failure is a 400 naming the field. Direct types need a recipient
 * and a positive amount; for x402 and mpp both are ignored (the server derives them from the live
 * challenge) and payload.resource_url is required.
 */
export function parsePaymentRequest(input: PaymentRequestInput, mode: ApiKeyMode): PaymentRequest {
  if (input.agentId === undefined || input.agentId === '') throw invalidArgument('agent_id is required', 'agent_id_required');
  if (typeof input.agentId !== 'string') throw invalidArgument('agent_id must be a string');
  const type = (input.type === undefined ? 'raw_transaction' : input.type) as PaymentType;
  if (typeof type !== 'string' || !PAYMENT_TYPES.includes(type)) {
    throw invalidArgument(`type must be one of ${PAYMENT_TYPES.join(', ')}`, 'unsupported_type');
  }
  if (input.payload !== undefined && !isPlainObject(input.payload)) throw invalidArgument('payload must be an object');
  const payload = (input.payload ?? {}) as Record<string, unknown>;
  if (input.dryRun !== undefined && typeof input.dryRun !== 'boolean') throw invalidArgument('dry_run must be a boolean');
  let idempotencyKey: string | undefined;
  if (input.idempotencyKey !== undefined) {
    if (typeof input.idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(input.idempotencyKey)) {
      throw invalidArgument('Idempotency-Key must be 1 to 255 printable ASCII characters without spaces', 'invalid_idempotency_key');
    }
    idempotencyKey = input.idempotencyKey;
  }
  const chainId = input.chainId === undefined ? DEFAULT_CHAIN_ID : input.chainId;
  if (typeof chainId !== 'number' || !Number.isSafeInteger(chainId) || chainId <= 0) throw invalidArgument('chain_id must be a positive integer');
  const agentId = input.agentId;
  const dryRun = input.dryRun === true;

  if (type === 'x402' || type === 'mpp') {
    const url = payload.resource_url;
    if (url === undefined || url === '') throw invalidArgument(`payload.resource_url is required for type ${type}`, 'resource_url_required');
    if (typeof url !== 'string') throw invalidArgument('payload.resource_url must be a string');
    const method = payload.method === undefined ? 'GET' : payload.method;
    if (method !== 'GET' && method !== 'POST') throw invalidArgument('payload.method must be GET or POST');
    return { agentId, type, chainId, dryRun, idempotencyKey, recipient: '', amountMicros: 0n, payload: { kind: 'paywall', resourceUrl: url, method }, maxAmountMicros: maxAmountField(payload) };
  }

  if (!DIRECT_CHAINS[mode].includes(chainId)) {
    throw invalidArgument(`chain_id ${chainId} is not supported for ${type} with ak_${mode}_ keys (supported: ${DIRECT_CHAINS[mode].join(', ')})`, 'unsupported_chain');
  }
  if (input.recipientAddress === undefined || input.recipientAddress === '') {
    throw invalidArgument(`recipient_address is required for type ${type}`, 'recipient_required');
  }
  if (typeof input.recipientAddress !== 'string' || !ADDRESS.test(input.recipientAddress)) {
    throw invalidArgument('recipient_address must be a 0x-prefixed 20-byte hex address');
  }
  if (/^0x0{40}$/.test(input.recipientAddress)) throw invalidArgument('recipient_address must not be the zero address');
  if (input.amountUsd === undefined || input.amountUsd === '') throw invalidArgument(`amount_usd is required for type ${type}`, 'amount_required');
  if (typeof input.amountUsd !== 'string') throw invalidArgument('amount_usd must be a number');
  const amountMicros = parseUsd(input.amountUsd, 'amount_usd');
  if (amountMicros === 0n) throw invalidArgument('amount_usd must be greater than 0', 'invalid_amount');
  // Written out rather than spread from a shared base: V8 builds `{ ...base, more }` through its
  // slow path, which measured 2 µs and 2 KiB of garbage per sign request.
  return {
    agentId, type, chainId, dryRun, idempotencyKey,
    recipient: input.recipientAddress.toLowerCase(), amountMicros, payload: parseDirectPayload(type, payload), maxAmountMicros: null,
  };
}

/** True when the id cannot belong to any agent; lookups can skip the database. */
export function isMalformedAgentId(id: string): boolean {
  return !AGENT_ID.test(id);
}

/**
 * Canonical text of what a request asks for; its hash tells an idempotent repeat (same text) from
 * a conflicting reuse of the key (different text). dry_run and the key itself are not part of it.
 * A price ceiling is part of it when sent (and only then, so requests without one hash as before).
 */
export function canonicalRequest(r: PaymentRequest): string {
  const ceiling = r.maxAmountMicros === null ? [] : [r.maxAmountMicros.toString()];
  return requestJson([r.type, r.chainId, r.recipient, r.amountMicros.toString(), r.payload, ...ceiling], r.payload);
}

/**
 * JSON text of `value`, a request's parts holding its `payload`, with the payload's bigints (a raw
 * transaction's gas and fees) written as decimal strings. A replacer sends JSON.stringify down its
 * slow path for every value, so it is used only when the payload holds a bigint; the text is the
 * same either way (stored hashes and rows must keep matching), and a bigint anywhere else makes
 * JSON.stringify throw, never write a different text.
 */
export function requestJson(value: unknown, payload: PaymentRequest['payload']): string {
  for (const v of Object.values(payload)) {
    if (typeof v === 'bigint') return JSON.stringify(value, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));
  }
  return JSON.stringify(value);
}
