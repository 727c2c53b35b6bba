import type { Logger } from 'pino';
import { authenticateApiKey } from '../app/accounts/apiKeys.js';
import type { AppDeps } from '../app/deps.js';
import { pingAgent } from '../app/organizations/ping.js';
import { resolveServices } from '../app/registry/registry.js';
import { DomainError, OVERLOADED_RETRY_AFTER_SECONDS } from '../domain/errors.js';
import type { ApiKeyPrincipal } from '../domain/types.js';
import { requestHeader, sendJson, send, type NodeRequest, type NodeResponse } from '../http/io.js';
import { createRouter, decodePathParam, type RouteSpec } from '../http/router.js';
import { holdToMessage, parseJsonObject, readRestBody, stringField, usdField } from './body.js';
import { errorResponse, STORAGE_FAILED, type RestResponse } from './errors.js';
import { overloaded, type Gate } from '../overload/admission.js';
import { agentSpendJson, approvalStatusJson, pingJson, quoteJson, resolveJson, signJson } from './mappers.js';
import { getAgentSpend } from '../app/payments/agentSpend.js';
import { quotePayment } from '../app/payments/quote.js';
import { signPayment } from '../app/payments/pipeline.js';
import { getApprovalStatus } from '../app/approvals/approvals.js';
import { idempotencyKeyOf } from '../domain/paymentRequest.js';
import { errorCodeOf, signOutcomeOf, type Metrics } from '../observability/metrics.js';
import { SignRequestSchema } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { signPayloadMessage } from '../protoMapping/signPayload.js';

/** What a route handler receives: the authenticated caller, the parsed URL and a body reader. */
export type RestCall = {
  principal: ApiKeyPrincipal;
  url: URL;
  params: Record<string, string>;
  body: () => Promise<Record<string, unknown>>;
  header: (name: string) => string | undefined;
  log: Logger;
};

type Route = RouteSpec & {
  /** The body's top-level fields (POST routes): any other is refused with 400. */
  fields?: readonly string[];
  handle: (call: RestCall) => RestResponse | Promise<RestResponse>;
};

function route(method: Route['method'], path: string, handle: Route['handle'], fields?: readonly string[]): Route {
  return { method, path, handle, fields };
}

/**
 * The body fields of POST /api/sign: the wire protocol's, and `idempotency_key`, the field the RPC
 * SignRequest carries, which means the same here as the Idempotency-Key header.
 */
const SIGN_FIELDS = ['agent_id', 'type', 'chain_id', 'recipient_address', 'amount_usd', 'payload', 'dry_run', 'idempotency_key'] as const;

/** The exact /api/* surface of the wire protocol, mapped onto the same use cases as the RPCs. */
export function createRestRoutes(deps: AppDeps, metrics?: Metrics): Route[] {
  return [
    route('POST', '/api/ping', async (call) => {
      const body = await call.body();
      const agentId = stringField(body, 'agent_id') ?? '';
      return { status: 200, body: pingJson(await pingAgent(deps, call.principal, agentId)) };
    }, ['agent_id']),
    route('GET', '/api/resolve', async (call) => {
      const slugs = [...call.url.searchParams.getAll('slug'), ...call.url.searchParams.getAll('slugs')];
      return { status: 200, body: resolveJson(await resolveServices(deps, call.principal, slugs)) };
    }),
    route('POST', '/api/sign', async (call) => {
      const body = await call.body();
      holdSignBody(body);
      const result = await observed(() => signPayment(deps, call.principal, {
        agentId: body.agent_id,
        type: body.type,
        chainId: body.chain_id,
        recipientAddress: body.recipient_address,
        // JSON numbers as the digits the client sent, so no float reaches the arithmetic.
        amountUsd: usdField(body, 'amount_usd'),
        payload: payloadWithUsdText(body.payload),
        dryRun: body.dry_run,
        idempotencyKey: idempotencyKeyOf(body.idempotency_key, call.header('idempotency-key')),
      }), (r) => metrics?.observeSign(body.type, ...signOutcomeOf(r), r.agentId), (err) => metrics?.observeSign(body.type, 'error', errorCodeOf(err)));
      return signJson(result);
    }, SIGN_FIELDS),
    route('POST', '/api/quote', async (call) => {
      const body = await call.body();
      const result = await observed(
        () => quotePayment(deps, call.principal, { url: body.url, agentId: body.agent_id, method: body.method }),
        (r) => metrics?.observeProbe(r.offer.rail), (err) => metrics?.observeProbe(errorCodeOf(err)),
      );
      return quoteJson(result);
    }, ['url', 'agent_id', 'method']),
    // Extension beyond the wire protocol: the agent's own remaining budget (README "API").
    route('GET', '/api/agents/{id}/spend', async (call) => ({ status: 200, body: agentSpendJson(await getAgentSpend(deps, call.principal, call.params.id!)) })),
    route('GET', '/api/approvals/{id}/status', async (call) => {
      try {
        return { status: 200, body: approvalStatusJson(await getApprovalStatus(deps, call.principal, call.params.id!)) };
      } catch (err) {
        // The wire protocol wants this 404 empty of detail, so nothing leaks across organizations.
        if (err instanceof DomainError && err.kind === 'not_found') return { status: 404, body: undefined };
        throw err;
      }
    }),
  ];
}

/**
 * Holds a sign body to SignRequest: integer fields written as integers, and the payload's keys
 * those of the payload message of its type (the oneof member SignRequest carries for it, whose
 * field names are the REST payload's keys), so that a misspelt `valid_for_second` is refused
 * rather than dropped for a default (an hour where 30 seconds were asked). A type that is none,
 * or a payload that is no object, is left to the use case, which refuses both.
 */
function holdSignBody(body: Record<string, unknown>): void {
  holdToMessage(body, SignRequestSchema, '', undefined);
  const type = body.type === undefined ? 'raw_transaction' : body.type;
  const payloadMessage = signPayloadMessage(type);
  const payload = body.payload;
  if (!payloadMessage || typeof payload !== 'object' || payload === null || Array.isArray(payload)) return;
  holdToMessage(payload as Record<string, unknown>, payloadMessage, 'payload.', { what: `the ${type as string} payload` });
}

/** The sign payload with its USD ceiling (`max_amount_usd`) as the text the client wrote; the rest of the open payload as sent. */
function payloadWithUsdText(payload: unknown): unknown {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return payload;
  const p = payload as Record<string, unknown>;
  if (typeof p.max_amount_usd !== 'number') return p;
  const copy: Record<string, unknown> = Object.assign({}, p);
  copy.max_amount_usd = usdField(p, 'max_amount_usd');
  return copy;
}

/** Runs `work`, reporting its result or its error (which it rethrows) to the metrics. */
async function observed<T>(work: () => Promise<T>, ok: (r: T) => void, failed: (err: unknown) => void): Promise<T> {
  try {
    const r = await work();
    ok(r);
    return r;
  } catch (err) {
    failed(err);
    throw err;
  }
}

/** Writes a REST answer: JSON, or headers alone when the wire protocol wants an empty body. */
function sendRest(res: NodeResponse, r: RestResponse): void {
  if (r.body === undefined) send(res, r.status, { 'cache-control': 'no-store', ...r.headers });
  else sendJson(res, r.status, r.body, r.headers);
}

const RETRY_AFTER_MS = OVERLOADED_RETRY_AFTER_SECONDS * 1000;

/**
 * A request target that WHATWG URL parsing leaves as it is: `/`, then segments of unreserved
 * characters, none `.` or `..`, not starting `//` (a scheme-relative URL). Exported for its test.
 */
export const PLAIN_PATH = /^(?!\/\/)(?:\/(?!\.\.?(?:\/|$))[A-Za-z0-9_~.-]*)+$/;

/** Resolves at the next turn of the event loop, once the parser has handed over what arrived with the headers. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Stops reading an HTTP/1.1 connection for `ms` (what it sends meanwhile waits in the kernel's buffer). */
function holdConnection(socket: NodeRequest['socket'], ms: number): void {
  if (!socket || socket.destroyed) return;
  socket.pause();
  setTimeout(() => socket.resume(), ms).unref();
}

/**
 * Handles one /api/* request: match, authenticate (before the body is read, so unauthenticated
 * callers cannot make us buffer anything), read the body, enter the admission gate, run, and
 * write JSON. Never lets an error escape.
 *
 * While the gate is full, a matched request is refused right after the match, before it is
 * authenticated or its body read, so a refusal costs next to nothing and a flood of them cannot
 * starve the requests inside. The slot itself is still taken only after authentication and the
 * whole body, so a slow or unauthenticated upload never holds one.
 *
 * After such a refusal an HTTP/1.1 connection is not read again until its Retry-After has passed
 * (a client that waits as told notices nothing), and one whose body has not all arrived is closed
 * (`Connection: close`) rather than waited for. Without that, clients that ignore Retry-After keep
 * thousands of connections readable at every turn of the event loop, and since libuv accepts one
 * connection per readiness report of the listener, new connections (a health probe's included)
 * waited seconds to be accepted. Closing every refused connection instead only moves the crowd
 * into the accept queue, where new connections wait behind it.
 */
export function createRestHandler(deps: AppDeps, routes: Route[], admission?: Gate) {
  const router = createRouter(routes);
  // Built once: a refusal under overload costs no allocation of an error and its stack.
  const refusal = admission && errorResponse(overloaded(admission.what), undefined);
  const tenantRefusal = admission && errorResponse(overloaded(`${admission.what} for this organization`), undefined);
  // `matched` hears the route template the request matched ('unmatched' for none), its metrics label.
  return async (req: NodeRequest, res: NodeResponse, requestLog: () => Logger, matched?: (route: string) => void): Promise<void> => {
    let result: RestResponse;
    let release: (() => void) | undefined;
    let early = false;
    try {
      const target = req.url ?? '/';
      // A plain path is its own pathname; anything WHATWG URL parsing could change (dot segments,
      // escapes, a query, backslashes) goes through it. The URL object itself is built on demand.
      const plain = PLAIN_PATH.test(target);
      let url: URL | undefined;
      const parsedUrl = () => (url ??= new URL(target, 'http://localhost'));
      const match = router.match(req.method, plain ? target : parsedUrl().pathname);
      matched?.(match.kind === 'found' ? match.route.path : 'unmatched');
      if (match.kind === 'not_found') {
        result = { status: 404, body: { error: 'Not found', code: 'not_found' } };
      } else if (match.kind === 'method_not_allowed') {
        result = { status: 405, body: { error: 'Method not allowed', code: 'method_not_allowed' }, headers: { allow: match.allow.join(', ') } };
      } else if (refusal && admission?.full()) {
        result = refusal;
        early = true;
      } else {
        const chosen = match.route;
        const principal = await authenticateApiKey(deps, req.headers.authorization);
        // The organization's share of the gate is full: refused like a full gate (before the body
        // is read, the connection held for Retry-After), or its flood would be served refusals as
        // fast as it can send and starve everything else, health checks included.
        if (tenantRefusal && admission?.full(principal.orgId)) {
          result = tenantRefusal;
          early = true;
        } else {
          // A malformed %-escape is just an id that matches nothing, not a server error.
          const params = Object.fromEntries(Object.entries(match.params).map(([k, v]) => [k, decodePathParam(v) ?? v]));
          const raw = chosen.method === 'POST' ? await readRestBody(req) : Buffer.alloc(0);
          // In flight from here (authenticated, request read in full) until the answer is computed,
          // even if the client has gone; beyond the bound: 503 overloaded at once, nothing done.
          release = admission?.enter(principal.orgId);
          result = await chosen.handle({
            principal, params,
            get url() {
              return parsedUrl();
            },
            get log() {
              return requestLog();
            },
            body: async () => parseJsonObject(raw, chosen.fields),
            header: (name) => requestHeader(req, name),
          });
        }
      }
    } catch (err) {
      result = errorResponse(err, requestLog());
    } finally {
      release?.();
    }
    // Computed while a sync failed: it may rest on rows that are not on disk (fail-stop).
    if (deps.store.failure()) result = { status: 503, body: STORAGE_FAILED };
    let hold = false;
    if (early && req.httpVersion.startsWith('1')) {
      // A body sent with the headers has been parsed by the next turn (and is dropped with the answer).
      if (!req.complete) await nextTurn();
      if (req.complete) hold = true;
      else result = { ...result, headers: { ...result.headers, connection: 'close' } };
    }
    if (hold) res.once('finish', () => holdConnection(req.socket, RETRY_AFTER_MS));
    if (!res.headersSent) sendRest(res, result);
  };
}
