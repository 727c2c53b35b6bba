import type { DescMethodUnary, DescMessage, MessageShape } from '@bufbuild/protobuf';
import { PaymentPolicyService } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { DomainError, invalidArgument } from '../domain/errors.js';
import { parsePaymentRequest } from '../domain/paymentRequest.js';
import type { ApiKeyPrincipal } from '../domain/types.js';
import type { Method } from '../http/router.js';
import { stringField } from './body.js';
import type { RestResponse } from './errors.js';
import { agentSpendRest, approvalStatusRest, pingRest, quoteRest, resolveRest, signRest } from './mappers.js';

/**
 * The REST surface (/api/*) as a declared mapping onto PaymentPolicyService: each route names the
 * RPC that answers it, where each field of that RPC's request message comes from (path, query,
 * JSON body, header), the mapper that writes the REST body from the response message, and the
 * statuses it answers. The REST handler (router.ts) decodes into the request message by this table
 * (decode.ts) and calls the same service implementation the Connect server serves; the OpenAPI
 * document (openapi.ts) is generated from it; test/unit/restParity.test.ts holds it to the
 * descriptors in both directions.
 */

/** Where one request field comes from. */
export type FieldPlace =
  /** A key of the JSON body. `usdText`: a JSON number is held as the digits the client wrote, not as a double. */
  | { in: 'body'; key: string; usdText?: boolean }
  /**
   * A member of a oneof, read from the body's `key` object: the member named by the REST value of
   * the field `chosenBy` (its `otherwise` member when that is unset). `usdText` lists the member's
   * keys held as written, like the body's.
   */
  | { in: 'body'; key: string; member: { chosenBy: string; otherwise: string }; usdText?: readonly string[] }
  /** Every value of these query parameters, in order (a repeated field). */
  | { in: 'query'; names: readonly string[] }
  /** A `{param}` segment of the path, percent-decoded. */
  | { in: 'path'; param: string }
  /** A body key or a header: either alone, or both when equal (idempotencyKeyOf's rule). */
  | { in: 'body_or_header'; key: string; header: string };

/**
 * The REST values of a request by their REST key (body key, query name, path param), as read
 * before any is held to its proto field: JSON types as the client sent them.
 */
export type RestValues = Record<string, unknown>;

/** One documented answer: its description and, for a JSON body, the names of its schemas (openapi.ts). */
export type ResponseSpec = { description: string; body?: readonly string[]; headers?: readonly ('Allow' | 'Retry-After')[] };

export type RestRoute<I extends DescMessage = DescMessage, O extends DescMessage = DescMessage> = {
  method: Method;
  path: string;
  rpc: DescMethodUnary<I, O>;
  summary: string;
  /** The place of every request field, by proto field name, in the order the body keys are listed to a client. */
  request: Readonly<Record<string, FieldPlace>>;
  /**
   * Refuses the values the request message cannot carry as sent (a JSON type its field does not
   * take, a number out of its range, a name its enum lacks, an empty string) with the error the use
   * case answers for them, in its order; it runs only for such a request (decode.ts). A value it
   * lets through that still cannot be held is one the use case ignores, and stays unset.
   */
  check?: (values: RestValues, principal: ApiKeyPrincipal) => void;
  /** Writes the REST answer from the response message. */
  respond: (message: MessageShape<O>) => RestResponse;
  /** A REST answer of its own for an error, where the wire protocol fixes one; undefined keeps the common error body. */
  refusal?: (err: unknown) => RestResponse | undefined;
  /** Every status it answers, for the OpenAPI document and its test. */
  responses: Readonly<Record<number, ResponseSpec>>;
};

const rpc = PaymentPolicyService.method;

function route<I extends DescMessage, O extends DescMessage>(r: RestRoute<I, O>): RestRoute {
  return r as unknown as RestRoute;
}

/** Answers every authenticated /api/* path can give besides its own. */
export const COMMON_RESPONSES: Readonly<Record<number, ResponseSpec>> = {
  401: { description: 'Missing, unknown or revoked API key (`unauthenticated`)', body: ['Error'] },
  405: { description: 'Method not allowed (`method_not_allowed`)', body: ['Error'], headers: ['Allow'] },
  500: { description: 'Internal error (`internal`); details only in the server log', body: ['Error'] },
  503: {
    description: '`overloaded` or `storage_full` (both with Retry-After), `storage_failed` (the service is stopping) or `treasury_not_provisioned`',
    body: ['Error'], headers: ['Retry-After'],
  },
};
const BODY_RESPONSES: Readonly<Record<number, ResponseSpec>> = {
  400: { description: 'Invalid request: see the error codes in docs/errors.md', body: ['Error'] },
  413: { description: 'Request body over 64 KiB (`body_too_large`)', body: ['Error'] },
};

const QUOTE_TYPE_REFUSALS = {
  agent_id: () => invalidArgument('agent_id must be a string'),
  url: () => invalidArgument('url must be a string', 'invalid_url'),
  method: () => invalidArgument('method must be GET or POST', 'invalid_method'),
} as const;

/** The RPCs REST does not answer, each with the reason. */
export const RPC_ONLY: Readonly<Record<string, string>> = {};

/** The /api/* routes, in the order the router tries them. */
export const REST_ROUTES: readonly RestRoute[] = [
  route({
    method: 'POST', path: '/api/ping', rpc: rpc.ping,
    summary: 'Check an API key and agent pair (marks the agent as connected)',
    request: { agent_id: { in: 'body', key: 'agent_id' } },
    // A non-string agent_id is refused by REST's own reading of it (the RPC cannot receive one).
    check: (v) => void stringField(v, 'agent_id'),
    respond: pingRest,
    responses: {
      200: { description: "The agent belongs to the key's organization", body: ['Ping'] },
      ...BODY_RESPONSES,
      400: { description: "`missing_agent_id` (missing, unknown, revoked or another organization's agent) or `invalid_json`", body: ['Error'] },
      ...COMMON_RESPONSES,
    },
  }),
  route({
    method: 'GET', path: '/api/resolve', rpc: rpc.resolve,
    summary: 'Look up registry records by slug',
    request: { slugs: { in: 'query', names: ['slug', 'slugs'] } },
    respond: resolveRest,
    responses: {
      200: { description: 'Each slug with its record, or null', body: ['Resolve'] },
      400: { description: '`slug_required`, `too_many_slugs` or `resolve_too_large`', body: ['Error'] },
      ...COMMON_RESPONSES,
    },
  }),
  route({
    method: 'POST', path: '/api/sign', rpc: rpc.sign,
    summary: 'Evaluate the policy for one payment and sign it, queue it for approval, or refuse it',
    request: {
      agent_id: { in: 'body', key: 'agent_id' },
      type: { in: 'body', key: 'type' },
      chain_id: { in: 'body', key: 'chain_id' },
      recipient_address: { in: 'body', key: 'recipient_address' },
      amount_usd: { in: 'body', key: 'amount_usd', usdText: true },
      eip3009: { in: 'body', key: 'payload', member: { chosenBy: 'type', otherwise: 'raw_transaction' } },
      permit2: { in: 'body', key: 'payload', member: { chosenBy: 'type', otherwise: 'raw_transaction' } },
      raw_transaction: { in: 'body', key: 'payload', member: { chosenBy: 'type', otherwise: 'raw_transaction' } },
      x402: { in: 'body', key: 'payload', member: { chosenBy: 'type', otherwise: 'raw_transaction' }, usdText: ['max_amount_usd'] },
      mpp: { in: 'body', key: 'payload', member: { chosenBy: 'type', otherwise: 'raw_transaction' }, usdText: ['max_amount_usd'] },
      dry_run: { in: 'body', key: 'dry_run' },
      idempotency_key: { in: 'body_or_header', key: 'idempotency_key', header: 'Idempotency-Key' },
    },
    // The sign use case's own validation, on the values as sent: a null, a string chain id or a
    // made-up type is refused with the same text and in the same order as the use case refuses
    // them, though SignRequest cannot carry them to it.
    check: (v, principal) => void parsePaymentRequest({
      agentId: v.agent_id, type: v.type, chainId: v.chain_id, recipientAddress: v.recipient_address, amountUsd: v.amount_usd,
      payload: v.payload, dryRun: v.dry_run, idempotencyKey: v.idempotency_key,
    }, principal.mode),
    respond: signRest,
    responses: {
      200: { description: 'Signed (or a dry run the policy allows)', body: ['SignSigned', 'SignDryRun'] },
      202: { description: 'Queued for human approval (or a dry run that would be)', body: ['SignPending', 'SignDryRun'] },
      403: { description: 'Refused by the policy (or a dry run that would be)', body: ['SignDenied', 'SignDryRun'] },
      ...BODY_RESPONSES,
      404: { description: "`agent_not_found` (unknown or another organization's agent)", body: ['Error'] },
      409: { description: '`idempotency_key_reused` (same key, different request), `in_progress`, `signing_failed`', body: ['Error'] },
      ...COMMON_RESPONSES,
    },
  }),
  route({
    method: 'POST', path: '/api/quote', rpc: rpc.quote,
    summary: 'Probe a paywalled URL and evaluate the policy for its price (never signs)',
    request: { url: { in: 'body', key: 'url' }, agent_id: { in: 'body', key: 'agent_id' }, method: { in: 'body', key: 'method' } },
    // The quote use case's refusals of a value that is no string, in its order: a missing agent_id
    // or url is left to the use case, which answers that first.
    check: (v) => {
      if (v.agent_id === undefined || v.agent_id === '') return;
      if (typeof v.agent_id !== 'string') throw QUOTE_TYPE_REFUSALS.agent_id();
      if (v.url === undefined || v.url === '') return;
      if (typeof v.url !== 'string') throw QUOTE_TYPE_REFUSALS.url();
      if (v.method !== undefined && typeof v.method !== 'string') throw QUOTE_TYPE_REFUSALS.method();
    },
    respond: quoteRest,
    responses: {
      200: { description: 'The policy allows the offer', body: ['Quote'] },
      202: { description: 'The offer would need human approval', body: ['Quote'] },
      403: { description: 'The policy refuses the offer', body: ['Quote'] },
      ...BODY_RESPONSES,
      404: { description: '`agent_not_found`', body: ['Error'] },
      ...COMMON_RESPONSES,
    },
  }),
  // Extension beyond the wire protocol: the agent's own remaining budget (README "API").
  route({
    method: 'GET', path: '/api/agents/{id}/spend', rpc: rpc.getAgentSpend,
    summary: "An agent's remaining budget in the rolling window (extension beyond the wire protocol)",
    request: { agent_id: { in: 'path', param: 'id' } },
    respond: agentSpendRest,
    responses: {
      200: { description: "The agent's cap, what counts against it, and what is left", body: ['AgentSpend'] },
      404: { description: "`agent_not_found` (unknown or another organization's agent)", body: ['Error'] },
      ...COMMON_RESPONSES,
    },
  }),
  route({
    method: 'GET', path: '/api/approvals/{id}/status', rpc: rpc.getApprovalStatus,
    summary: 'Where an approval request stands',
    request: { id: { in: 'path', param: 'id' } },
    respond: approvalStatusRest,
    // The wire protocol wants this 404 empty of detail, so nothing leaks across organizations.
    refusal: (err) => (err instanceof DomainError && err.kind === 'not_found' ? { status: 404, body: undefined } : undefined),
    responses: {
      200: { description: 'The approval request', body: ['ApprovalStatus'] },
      404: { description: "Unknown, or another organization's: an empty body, so nothing leaks across organizations" },
      ...COMMON_RESPONSES,
    },
  }),
];

/** The body keys a route reads, in its table's order: any other top-level key is refused with 400. */
export function bodyKeys(r: RestRoute): string[] {
  const keys: string[] = [];
  for (const place of Object.values(r.request)) {
    if ((place.in === 'body' || place.in === 'body_or_header') && !keys.includes(place.key)) keys.push(place.key);
  }
  return keys;
}
