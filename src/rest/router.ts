import { createContextValues, type ContextValues, type HandlerContext } from '@connectrpc/connect';
import { create, type Message } from '@bufbuild/protobuf';
import type { Logger } from 'pino';
import { authenticateApiKey } from '../app/accounts/apiKeys.js';
import type { AppDeps } from '../app/deps.js';
import { OVERLOADED_RETRY_AFTER_SECONDS } from '../domain/errors.js';
import type { ApiKeyPrincipal } from '../domain/types.js';
import { requestHeader, sendJson, send, type NodeRequest, type NodeResponse } from '../http/io.js';
import { createRouter, decodePathParam, type RouteSpec } from '../http/router.js';
import { parseJsonObject, readRestBody } from './body.js';
import { errorResponse, STORAGE_FAILED, type RestResponse } from './errors.js';
import { overloaded, type Gate } from '../overload/admission.js';
import { observeQuote, observeSign, type Metrics } from '../observability/metrics.js';
import { PaymentPolicyService, type QuoteResponse, type SignResponse } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { createPaymentPolicyService } from '../rpc/paymentPolicyService.js';
import { apiKeyPrincipalKey, requestLoggerKey } from '../rpc/context.js';
import { bodyKeys, REST_ROUTES, type RestRoute, type RestValues } from './routes.js';
import { holdRestValues, readRestValues } from './decode.js';

/** What a route handler receives: the authenticated caller, the parsed URL and a body reader. */
export type RestCall = {
  principal: ApiKeyPrincipal;
  /** Whether the request target has a query string; `url` is built on demand. */
  hasQuery: boolean;
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

type UnaryCall = (request: Message, ctx: HandlerContext) => Promise<unknown>;

/** How a route's outcome is counted: the REST payment type as sent (a made-up one is `invalid`), the verdict and its reason class. */
type Observer = { ok: (m: Message, values: RestValues) => void; failed: (err: unknown, values: RestValues) => void };

function observers(metrics: Metrics): Partial<Record<string, Observer>> {
  return {
    sign: {
      ok: (message, v) => observeSign(metrics, v.type, { message: message as SignResponse }),
      failed: (error, v) => observeSign(metrics, v.type, { error }),
    },
    quote: {
      ok: (message) => observeQuote(metrics, { message: message as QuoteResponse }),
      failed: (error) => observeQuote(metrics, { error }),
    },
  };
}

/**
 * The /api/* routes of the table (routes.ts), each answered by its RPC on the service
 * implementation the Connect server runs: the request read into the RPC's request message
 * (decode.ts), the call made with the authenticated principal in its context, and the response
 * message written as the REST body by the route's mapper.
 */
export function createRestRoutes(deps: AppDeps, metrics?: Metrics): Route[] {
  const service = createPaymentPolicyService(deps) as unknown as Record<string, UnaryCall>;
  const observing = metrics ? observers(metrics) : {};
  return REST_ROUTES.map((spec): Route => {
    const impl = service[spec.rpc.localName]!.bind(service);
    const observer = observing[spec.rpc.localName];
    const fields = spec.method === 'POST' ? bodyKeys(spec) : undefined;
    return {
      method: spec.method,
      path: spec.path,
      fields,
      async handle(call) {
        // Every refusal of a routed request is counted, its reading included, as the RPC
        // interceptor counts the refusals of strict input.
        let values: RestValues = {};
        try {
          const body = fields ? await call.body() : undefined;
          values = body ?? {};
          values = readRestValues(spec, body, call);
          const request = holdRestValues(spec, values, call.principal);
          const response = create(spec.rpc.output, (await impl(request, new RestHandlerContext(spec, call))) as never);
          observer?.ok(response, values);
          return spec.respond(response);
        } catch (err) {
          observer?.failed(err, values);
          const own = spec.refusal?.(err);
          if (own) return own;
          throw err;
        }
      },
    };
  });
}

/** REST never aborts a handler (a client that goes away leaves the payment to finish), so its calls share a signal that never fires. */
const NEVER_ABORTED = new AbortController().signal;

/**
 * The context a service method reads: the principal REST authenticated (so the key is not looked
 * up again) and the request's logger. Built here rather than by connect's createHandlerContext,
 * whose deadline and linked abort signals measured about 35 µs a call, a tenth of a signed
 * payment's main-thread time, for a deadline REST does not have. Headers are made when read.
 */
class RestHandlerContext implements HandlerContext {
  readonly service = PaymentPolicyService;
  readonly protocolName = 'rest';
  readonly signal = NEVER_ABORTED;
  readonly values: ContextValues;
  readonly method: RestRoute['rpc'];
  readonly requestMethod: string;
  readonly url: string;
  #requestHeader: Headers | undefined;
  #responseHeader: Headers | undefined;
  #responseTrailer: Headers | undefined;

  constructor(spec: RestRoute, call: RestCall) {
    this.method = spec.rpc;
    this.requestMethod = spec.method;
    this.url = spec.path;
    this.values = createContextValues().set(apiKeyPrincipalKey, call.principal).set(requestLoggerKey, () => call.log);
  }

  timeoutMs(): number | undefined {
    return undefined;
  }

  get requestHeader(): Headers {
    return (this.#requestHeader ??= new Headers());
  }

  get responseHeader(): Headers {
    return (this.#responseHeader ??= new Headers());
  }

  get responseTrailer(): Headers {
    return (this.#responseTrailer ??= new Headers());
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
            principal, params, hasQuery: !plain && target.includes('?'),
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
