import { create, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import { timestampMs, type Timestamp } from '@bufbuild/protobuf/wkt';
import {
  GetAgentSpendResponseSchema,
  GetApprovalStatusResponseSchema,
  PingResponseSchema,
  QuoteResponseSchema,
  ResolveResponseSchema,
  SignResponseSchema,
  type ResolveResult as ResolveResultMessage,
} from '../../gen/paypolicy/v1/payment_policy_pb.js';
import type { ServiceRecord } from '../../gen/paypolicy/v1/registry_pb.js';
import type { AgentSpendStatus } from '../app/payments/agentSpend.js';
import type { PingResult } from '../app/organizations/ping.js';
import type { QuoteResult } from '../app/payments/quote.js';
import type { ResolveResult } from '../app/registry/registry.js';
import type { SignResult } from '../app/payments/pipeline.js';
import { agentStatus, approvalStatus, offerStatus, paymentType, signOutcome, type EnumCodec } from '../protoMapping/enums.js';
import {
  agentSpendToProto,
  approvalStatusToProto,
  pingResultToProto,
  quoteResultToProto,
  resolveResultToProto,
  signResultToProto,
  type ApprovalRecord,
} from '../protoMapping/messages.js';

/**
 * REST is a declared mapping of the proto messages. Each use-case result becomes its protobuf
 * message (src/protoMapping/messages.ts, the same one the RPCs send), and each REST body is written
 * from that message by a table below: one entry per REST key, in the wire protocol's key order,
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

const field = (rest: string, proto = rest, write?: RestField['write']): RestField => ({ rest, proto, write });
const object = (rest: string, proto: string, fields: readonly RestField[]): RestField => ({ rest, proto, fields });
const constant = (rest: string, value: unknown): RestField => ({ rest, write: () => value });

const orNull = (v: unknown) => v ?? null;
const omitUnset = (v: unknown) => (v === undefined ? OMIT : v);
const omitEmpty = (v: unknown) => (v === '' ? OMIT : v);
/** A USD decimal string as a JSON number (the wire protocol's amount_usd and thresholds). */
const usdNumber = (v: unknown) => (v === undefined ? OMIT : Number(v as string));
const isoTime = (v: unknown) => (v === undefined ? null : new Date(timestampMs(v as Timestamp)).toISOString());
/** An enum value as REST names it: AGENT_STATUS_ACTIVE is `active`. */
const enumName = (codec: EnumCodec<string, number>) => (v: unknown) => codec.fromProto(v as number) ?? null;

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
  field('paymentMethods', 'payment_methods', (v) => (v as ServiceRecord['paymentMethods']).map((m) => writeRest(PAYMENT_METHOD_FIELDS, m))),
  field('endpoints', 'endpoints', (v) => (v as ServiceRecord['endpoints']).map((e) => writeRest(ENDPOINT_FIELDS, e))),
];
export const PAYMENT_METHOD_FIELDS: readonly RestField[] = [field('realm'), field('baseUrl', 'base_url'), field('protocol')];
export const ENDPOINT_FIELDS: readonly RestField[] = [
  field('method'), field('path'), field('description'), field('priceAtomic', 'price_atomic', orNull), field('currency'),
  field('pricingModel', 'pricing_model'), field('protocol'),
];

/** ResolveResponse.results is an object keyed by slug on REST (ResolveResult.slug), each value the record or null. */
export const RESOLVE_FIELDS: readonly RestField[] = [
  field('results', 'results', (v) =>
    // fromEntries defines own properties, so a slug such as "__proto__" stays plain data.
    Object.fromEntries((v as ResolveResultMessage[]).map((r) => [r.slug, r.service ? writeRest(SERVICE_FIELDS, r.service) : null]))),
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

/** The four REST shapes of a SignResponse: 200 signed, 202 pending, 403 denied, and a dry run. */
export const SIGN_FIELDS = {
  signed: [
    field('signature', 'signature', orNull), field('tx_hash', 'tx_hash', orNull), field('agent_id'), field('cost_usd', 'cost_usd', orNull),
    field('transaction_id'), field('idempotent'), field('type', 'type', enumName(paymentType)), field('chain_id'), field('recipient_address'),
    field('resource_url', 'resource_url', omitUnset), ...SIGNED_FIELDS,
  ],
  pending: [field('status', 'outcome', enumName(signOutcome)), field('reason'), field('transaction_id'), field('approval_request_id')],
  denied: [constant('error', 'Policy denied'), field('reason'), field('transaction_id')],
  dryRun: [
    field('dry_run'), field('status', 'outcome', enumName(signOutcome)), field('agent_id'), field('type', 'type', enumName(paymentType)),
    field('chain_id'), field('recipient_address'), field('amount_usd', 'amount_usd', usdNumber), field('reason', 'reason', omitEmpty),
    field('approval_threshold_usd', 'approval_threshold_usd', usdNumber),
  ],
} as const satisfies Record<string, readonly RestField[]>;

function message<D extends DescMessage>(schema: D, init: MessageInitShape<D>): MessageShape<D> {
  return create(schema, init);
}

export function pingJson(r: PingResult) {
  return writeRest(PING_FIELDS, message(PingResponseSchema, pingResultToProto(r)));
}

export function resolveJson(r: ResolveResult) {
  return writeRest(RESOLVE_FIELDS, message(ResolveResponseSchema, resolveResultToProto(r)));
}

const VERDICT_STATUS = { allowed: 200, pending_approval: 202, denied: 403 } as const;

/** Sign outcome → status and body: 200 signed, 202 pending approval, 403 policy denied; a dry run answers as its verdict would. */
export function signJson(r: SignResult): { status: number; body: unknown } {
  const m = message(SignResponseSchema, signResultToProto(r));
  const verdict = signOutcome.fromProto(m.outcome)!;
  if (m.dryRun) return { status: VERDICT_STATUS[verdict], body: writeRest(SIGN_FIELDS.dryRun, m) };
  const fields = verdict === 'allowed' ? SIGN_FIELDS.signed : verdict === 'pending_approval' ? SIGN_FIELDS.pending : SIGN_FIELDS.denied;
  return { status: VERDICT_STATUS[verdict], body: writeRest(fields, m) };
}

export function approvalStatusJson(a: ApprovalRecord) {
  return writeRest(APPROVAL_STATUS_FIELDS, message(GetApprovalStatusResponseSchema, approvalStatusToProto(a)));
}

/** Quote result → 200/202/403 with the Offer fields in the wire protocol's order. */
export function quoteJson(r: QuoteResult): { status: number; body: unknown } {
  const m = message(QuoteResponseSchema, quoteResultToProto(r));
  return { status: VERDICT_STATUS[offerStatus.fromProto(m.status)!], body: writeRest(QUOTE_FIELDS, m) };
}

/**
 * Where REST carries the request fields of PaymentPolicyService (REST requests are read by the
 * router and validated by the use cases; this table is the declared correspondence the contract
 * test checks against the descriptors). `body.x` is a JSON body key, `payload.*` the member of
 * SignRequest's payload oneof chosen by `type` (its field names are the payload's keys).
 */
export const REST_REQUEST_FIELDS = {
  'paypolicy.v1.SignRequest': {
    agent_id: 'body.agent_id', type: 'body.type', chain_id: 'body.chain_id', recipient_address: 'body.recipient_address',
    amount_usd: 'body.amount_usd', dry_run: 'body.dry_run', idempotency_key: 'header Idempotency-Key',
    eip3009: 'body.payload.*', permit2: 'body.payload.*', raw_transaction: 'body.payload.*', x402: 'body.payload.*', mpp: 'body.payload.*',
  },
  'paypolicy.v1.QuoteRequest': { url: 'body.url', agent_id: 'body.agent_id', method: 'body.method' },
  'paypolicy.v1.PingRequest': { agent_id: 'body.agent_id' },
  'paypolicy.v1.ResolveRequest': { slugs: 'query slug, slugs' },
  'paypolicy.v1.GetApprovalStatusRequest': { id: 'path /api/approvals/{id}/status' },
  'paypolicy.v1.GetAgentSpendRequest': { agent_id: 'path /api/agents/{id}/spend' },
} as const;

/** REST keys with no proto field, each with the reason. */
export const REST_ONLY = {
  'SignResponse.denied.error': "the wire protocol's fixed 403 text `Policy denied`; RPC callers read outcome DENIED",
} as const;

/** GET /api/agents/{id}/spend (an extension beyond the wire protocol): USD as decimal strings, like cost_usd. */
export const AGENT_SPEND_FIELDS: readonly RestField[] = [
  field('agent_id'), field('agent_name'), field('status', 'status', enumName(agentStatus)), field('window_hours'), field('spend_cap_usd'),
  field('committed_usd'), field('remaining_usd'), field('approval_threshold_usd'), field('as_of', 'as_of', isoTime),
];

export function agentSpendJson(a: AgentSpendStatus) {
  return writeRest(AGENT_SPEND_FIELDS, message(GetAgentSpendResponseSchema, agentSpendToProto(a)));
}
