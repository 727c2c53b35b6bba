import { timestampMs, type Timestamp } from '@bufbuild/protobuf/wkt';
import type {
  GetAgentSpendResponse,
  GetApprovalStatusResponse,
  PingResponse,
  QuoteResponse,
  ResolveResponse,
  SignResponse,
  ResolveResult as ResolveResultMessage,
} from '../../gen/paypolicy/v1/payment_policy_pb.js';
import type { ServiceRecord } from '../../gen/paypolicy/v1/registry_pb.js';
import { agentStatus, approvalStatus, offerStatus, paymentType, signOutcome, type EnumCodec } from '../protoMapping/enums.js';
import type { RestResponse } from './errors.js';

/**
 * REST is a declared mapping of the proto messages. Each route is answered by its RPC's response
 * message (routes.ts; the service implementation the Connect server runs), and each REST body is
 * written from that message by a table below: one entry per REST key, in the wire protocol's key order,
 * naming the proto field it comes from and how the value is written (nulls, omissions, enum names,
 * USD as a JSON number). test/contract.test.ts holds the tables to the descriptors: every proto
 * field has a REST counterpart and every REST key a proto field, except the lists at the end.
 */

/** What a writer returns to leave the key out of the body. */
export const OMIT = Symbol('omit');

/** One REST key: the proto field path (dotted, proto names) it is written from, or none for a constant. */
export type RestField = {
  rest: string;
  proto?: string;
  /** Value → JSON; the default writes it as it is. */
  write?: (value: unknown) => unknown;
  /** For a message-typed field: its REST object, written from the sub-message (omitted when unset). */
  fields?: readonly RestField[];
};

/**
 * What a writer makes of its field's JSON value, beyond the proto field's own type: read by the
 * OpenAPI generator (openapi.ts), never by the writing itself.
 */
export type JsonShape = {
  /** Written as null when unset. */
  nullable?: boolean;
  /** Left out of the body when unset or empty. */
  optional?: boolean;
  /** A USD decimal string written as a JSON number. */
  usdNumber?: boolean;
  /** A Timestamp written as an RFC 3339 date-time. */
  dateTime?: boolean;
  /** An enum written by the names of these values. */
  enum?: readonly string[];
  /** Always this value (no proto field). */
  const?: unknown;
  /** A list whose items are written by this table. */
  items?: () => readonly RestField[];
  /** An object keyed by each list item's `key` field, the value its `value` field written by `fields`, or null when unset. */
  keyedBy?: { key: string; value: string; fields: () => readonly RestField[] };
};

const shapes = new WeakMap<(value: unknown) => unknown, JsonShape>();

/** A writer with its JSON shape recorded. */
function shaped<W extends (value: unknown) => unknown>(write: W, shape: JsonShape): W {
  shapes.set(write, shape);
  return write;
}

/** The JSON shape of a table entry's writer; undefined when it writes the proto value as it is. */
export function jsonShape(f: RestField): JsonShape | undefined {
  return f.write ? shapes.get(f.write) : undefined;
}

const field = (rest: string, proto = rest, write?: RestField['write']): RestField => ({ rest, proto, write });
const object = (rest: string, proto: string, fields: readonly RestField[]): RestField => ({ rest, proto, fields });
const constant = (rest: string, value: unknown): RestField => ({ rest, write: shaped(() => value, { const: value }) });

const orNull = shaped((v: unknown) => v ?? null, { nullable: true });
const omitUnset = shaped((v: unknown) => (v === undefined ? OMIT : v), { optional: true });
const omitEmpty = shaped((v: unknown) => (v === '' ? OMIT : v), { optional: true });
/** A USD decimal string as a JSON number (the wire protocol's amount_usd and thresholds). */
const usdNumber = shaped((v: unknown) => (v === undefined ? OMIT : Number(v as string)), { usdNumber: true, optional: true });
const isoTime = shaped((v: unknown) => (v === undefined ? null : new Date(timestampMs(v as Timestamp)).toISOString()), { dateTime: true, nullable: true });
/** An enum value as REST names it: AGENT_STATUS_ACTIVE is `active`. */
const enumName = (codec: EnumCodec<string, number>) => shaped((v: unknown) => codec.fromProto(v as number) ?? null, { enum: codec.names });

/** Each table path as the message's property names (proto snake_case → protobuf-es camelCase), derived once. */
const propertyPaths = new Map<string, string[]>();

function valueAt(message: unknown, path: string): unknown {
  // Per request this was a split and a regex replace with a callback for every field: ~12 µs of
  // each signed answer in a CPU profile of the sign bench, for names fixed at start-up.
  let names = propertyPaths.get(path);
  if (names === undefined) {
    names = path.split('.').map((name) => name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()));
    propertyPaths.set(path, names);
  }
  let v = message as Record<string, unknown> | undefined;
  for (const name of names) v = v?.[name] as Record<string, unknown> | undefined;
  return v;
}

/** Writes one REST object from a message by its table. */
export function writeRest(fields: readonly RestField[], message: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const raw = f.proto === undefined ? undefined : valueAt(message, f.proto);
    const v = f.fields ? (raw === undefined ? OMIT : writeRest(f.fields, raw)) : f.write ? f.write(raw) : raw;
    if (v !== OMIT) out[f.rest] = v;
  }
  return out;
}

export const PING_FIELDS: readonly RestField[] = [
  field('ok'), field('agent_id'), field('agent_name'), field('org_id'), field('status', 'status', enumName(agentStatus)),
];

/** ServiceRecord keeps the registry's camelCase keys on REST (the proto's JSON names). */
export const SERVICE_FIELDS: readonly RestField[] = [
  field('id'), field('slug'), field('name'), field('description'), field('category'), field('logoUrl', 'logo_url'), field('docsUrl', 'docs_url'),
  field('paymentMethods', 'payment_methods', shaped((v) => (v as ServiceRecord['paymentMethods']).map((m) => writeRest(PAYMENT_METHOD_FIELDS, m)), { items: () => PAYMENT_METHOD_FIELDS })),
  field('endpoints', 'endpoints', shaped((v) => (v as ServiceRecord['endpoints']).map((e) => writeRest(ENDPOINT_FIELDS, e)), { items: () => ENDPOINT_FIELDS })),
];
export const PAYMENT_METHOD_FIELDS: readonly RestField[] = [field('realm'), field('baseUrl', 'base_url'), field('protocol')];
export const ENDPOINT_FIELDS: readonly RestField[] = [
  field('method'), field('path'), field('description'), field('priceAtomic', 'price_atomic', orNull), field('currency'),
  field('pricingModel', 'pricing_model'), field('protocol'),
];

/** ResolveResponse.results is an object keyed by slug on REST (ResolveResult.slug), each value the record or null. */
export const RESOLVE_FIELDS: readonly RestField[] = [
  field('results', 'results', shaped((v) =>
    // fromEntries defines own properties, so a slug such as "__proto__" stays plain data.
    Object.fromEntries((v as ResolveResultMessage[]).map((r) => [r.slug, r.service ? writeRest(SERVICE_FIELDS, r.service) : null])),
  { keyedBy: { key: 'slug', value: 'service', fields: () => SERVICE_FIELDS } })),
  field('resolvedCount', 'resolved_count'), field('unresolvedCount', 'unresolved_count'),
];

export const APPROVAL_STATUS_FIELDS: readonly RestField[] = [
  field('status', 'status', enumName(approvalStatus)), field('decided_at', 'decided_at', isoTime), field('expires_at', 'expires_at', isoTime),
  field('transaction_id'),
];

export const QUOTE_FIELDS: readonly RestField[] = [
  field('status', 'status', enumName(offerStatus)), field('rail'), field('chain_id'), field('amount_usd', 'amount_usd', usdNumber),
  object('recipient', 'recipient', [field('address'), field('slug', 'slug', orNull), field('name', 'name', orNull)]),
  field('resource_url'), field('scheme', 'scheme', orNull), field('network'), field('realm', 'realm', orNull), field('cached'),
  field('reason', 'reason', omitEmpty), field('approval_threshold_usd', 'approval_threshold_usd', usdNumber),
];

/** The signed material of a 200, beside the common fields; each object only for the types that produce it. */
const SIGNED_FIELDS: readonly RestField[] = [
  object('authorization', 'authorization', [
    field('from'), field('to'), field('value'), field('valid_after'), field('valid_before'), field('nonce'), field('token'),
    field('domain_name'), field('domain_version'), field('chain_id'),
  ]),
  // REST keeps Permit2's message flat, as it always has; the proto names it after Permit2.
  object('permit2', 'permit2', [
    field('owner'), field('token', 'permitted.token'), field('amount', 'permitted.amount'), field('spender'), field('nonce'), field('deadline'),
    field('to', 'witness.to'), field('valid_after', 'witness.valid_after'), field('permit2_address', 'verifying_contract'), field('chain_id'),
  ]),
  object('raw_transaction', 'raw_transaction', [field('serialized'), field('hash'), field('nonce'), field('token'), field('chain_id')]),
  object('mpp', 'mpp', [field('transaction_hash')]),
  object('payment_header', 'payment_header', [field('name'), field('value')]),
];

/** The rule behind a denial or an approval request (PolicyRule); absent when a person or an expiry decided. */
const RULE_FIELD = object('rule', 'rule', [
  field('kind'), field('window', 'window', orNull), field('scope', 'scope', orNull), field('recipient', 'recipient', orNull),
  field('limit', 'limit', orNull), field('spent', 'spent', orNull),
]);

/** The four REST shapes of a SignResponse: 200 signed, 202 pending, 403 denied, and a dry run. */
export const SIGN_FIELDS = {
  signed: [
    field('signature', 'signature', orNull), field('tx_hash', 'tx_hash', orNull), field('agent_id'), field('cost_usd', 'cost_usd', orNull),
    field('transaction_id'), field('idempotent'), field('type', 'type', enumName(paymentType)), field('chain_id'), field('recipient_address'),
    field('resource_url', 'resource_url', omitUnset), ...SIGNED_FIELDS,
  ],
  pending: [field('status', 'outcome', enumName(signOutcome)), field('reason'), field('transaction_id'), field('approval_request_id'), RULE_FIELD],
  denied: [constant('error', 'Policy denied'), field('reason'), field('transaction_id'), RULE_FIELD],
  dryRun: [
    field('dry_run'), field('status', 'outcome', enumName(signOutcome)), field('agent_id'), field('type', 'type', enumName(paymentType)),
    field('chain_id'), field('recipient_address'), field('amount_usd', 'amount_usd', usdNumber), field('reason', 'reason', omitEmpty),
    field('approval_threshold_usd', 'approval_threshold_usd', usdNumber), RULE_FIELD,
  ],
} as const satisfies Record<string, readonly RestField[]>;

export function pingRest(m: PingResponse): RestResponse {
  return { status: 200, body: writeRest(PING_FIELDS, m) };
}

export function resolveRest(m: ResolveResponse): RestResponse {
  return { status: 200, body: writeRest(RESOLVE_FIELDS, m) };
}

const VERDICT_STATUS = { allowed: 200, pending_approval: 202, denied: 403 } as const;

/** Sign outcome → status and body: 200 signed, 202 pending approval, 403 policy denied; a dry run answers as its verdict would. */
export function signRest(m: SignResponse): RestResponse {
  const verdict = signOutcome.fromProto(m.outcome)!;
  if (m.dryRun) return { status: VERDICT_STATUS[verdict], body: writeRest(SIGN_FIELDS.dryRun, m) };
  const fields = verdict === 'allowed' ? SIGN_FIELDS.signed : verdict === 'pending_approval' ? SIGN_FIELDS.pending : SIGN_FIELDS.denied;
  return { status: VERDICT_STATUS[verdict], body: writeRest(fields, m) };
}

export function approvalStatusRest(m: GetApprovalStatusResponse): RestResponse {
  return { status: 200, body: writeRest(APPROVAL_STATUS_FIELDS, m) };
}

/** Quote result → 200/202/403 with the Offer fields in the wire protocol's order. */
export function quoteRest(m: QuoteResponse): RestResponse {
  return { status: VERDICT_STATUS[offerStatus.fromProto(m.status)!], body: writeRest(QUOTE_FIELDS, m) };
}

/** REST keys with no proto field, each with the reason. */
export const REST_ONLY = {
  'SignResponse.denied.error': "the wire protocol's fixed 403 text `Policy denied`; RPC callers read outcome DENIED",
} as const;

/** One limit of the spend read: every key present, null where the limit has no such maximum. */
export const LIMIT_STATUS_FIELDS: readonly RestField[] = [
  field('window'), field('scope'), field('recipient', 'recipient', orNull), field('max_usd', 'max_usd', orNull), field('spent_usd'),
  field('remaining_usd', 'remaining_usd', orNull), field('max_count', 'max_count', orNull), field('count'),
  field('max_network_fee_wei', 'max_network_fee_wei', orNull), field('network_fee_wei'),
];

/** GET /api/agents/{id}/spend (an extension beyond the wire protocol): USD as decimal strings, like cost_usd. */
export const AGENT_SPEND_FIELDS: readonly RestField[] = [
  field('agent_id'), field('agent_name'), field('status', 'status', enumName(agentStatus)), field('window_hours'), field('spend_cap_usd'),
  field('committed_usd'), field('remaining_usd'), field('approval_threshold_usd'), field('as_of', 'as_of', isoTime),
  field('limits', 'limits', shaped((v) => (v as unknown[]).map((l) => writeRest(LIMIT_STATUS_FIELDS, l)), { items: () => LIMIT_STATUS_FIELDS })),
];

export function agentSpendRest(m: GetAgentSpendResponse): RestResponse {
  return { status: 200, body: writeRest(AGENT_SPEND_FIELDS, m) };
}
