import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import http2, { type Http2Session } from 'node:http2';
import net, { type Socket } from 'node:net';
import { compressionBrotli, compressionGzip, connectNodeAdapter } from '@connectrpc/connect-node';
import { Code, ConnectError, createContextValues, type ContextValues, type Interceptor } from '@connectrpc/connect';
import type { Logger } from 'pino';
import type { AppDeps } from '../app/deps.js';
import { STORAGE_FAILED } from '../rest/errors.js';
import { createGate, type Gate } from '../overload/admission.js';
import { authenticateApiKey } from '../app/accounts/apiKeys.js';
import { parseBearer } from '../app/accounts/auth/credentials.js';
import { requestHeader, send, sendJson, type NodeRequest, type NodeResponse } from '../http/io.js';
import { PaymentPolicyService, PaymentType, type QuoteResponse, type SignRequest, type SignResponse } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { AdminService } from '../../gen/paypolicy/v1/admin_pb.js';
import { observeQuote, observeSign, type Metrics } from '../observability/metrics.js';
import { createReadiness, type ReadinessOptions } from '../observability/readiness.js';
import { OPENAPI_DOCUMENT } from '../rest/openapi.js';
import { createRestHandler, createRestRoutes } from '../rest/router.js';
import { apiKeyPrincipalKey, requestLoggerKey } from '../rpc/context.js';
import { domainErrorInterceptor } from '../rpc/errors.js';
import { createRoutes, createServices } from '../rpc/routes.js';
import { createUnaryHandler } from '../rpc/unaryHandler.js';
import { RPC_JSON_OPTIONS, strictInputInterceptor } from '../rpc/strictInput.js';
import { capConnections, headersTimeoutMs, http1Timeouts, http2Settings, limitHttp2Sessions, resolveServerLimits, type ServerLimits } from './limits.js';
import { accessLog } from '../observability/logger.js';
import { SIGN_PAYLOAD_MEMBERS } from '../protoMapping/signPayload.js';

/** Connect messages larger than this are refused (ResourceExhausted) before decoding. */
export const MAX_RPC_MESSAGE_BYTES = 256 * 1024;

/** Request and response compressions RPCs offer (connect-node's default), and the smallest answer compressed (connect's default). */
const RPC_COMPRESSION = [compressionGzip, compressionBrotli];
const RPC_COMPRESS_MIN_BYTES = 1024;

/** Pending connections the kernel may queue for accept (Node's default is 511). */
const LISTEN_BACKLOG = 4096;

const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

export type ServerOptions = {
  deps: AppDeps;
  log: Logger;
  host: string;
  port: number;
  adminTokenHash: () => Buffer;
  tls?: { cert: Buffer; key: Buffer };
  /** Connection cap, timeouts and HTTP/2 stream limit; unset fields take their defaults. */
  limits?: Partial<ServerLimits>;
  /** Extra handler tried before the 404 fallback (the dashboard mounts here). */
  extraHandler?: (req: NodeRequest, res: NodeResponse, log: Logger) => boolean;
  /** /metrics: the collectors, and the bearer token that guards them (unset: loopback clients only). */
  metrics?: { metrics: Metrics; token?: string };
  /** What /readyz probes beyond the database and the signing threads (configured RPC nodes). */
  readiness?: ReadinessOptions;
};

/** Paths that are their own route label. */
const FIXED_ROUTES = new Set(['/', '/healthz', '/readyz', '/metrics', '/api/openapi.json']);
/** Every Connect procedure path (gRPC, gRPC-Web and Connect JSON alike): a closed set of labels. */
const RPC_PATHS = new Set([PaymentPolicyService, AdminService].flatMap((s) => s.methods.map((m) => `/${s.typeName}/${m.name}`)));
const OPENAPI_JSON = JSON.stringify(OPENAPI_DOCUMENT);

export type RunningServer = { port: number; url: string; close: (graceMs?: number) => Promise<void> };

/**
 * One listener for everything: REST /api/*, health checks, and Connect (gRPC, gRPC-Web, Connect
 * JSON). Without TLS, a net.Server reads the first bytes of each connection and hands it to an
 * HTTP/2 server when they are the h2c preface, else to an HTTP/1.1 server (Node 20 ignores
 * allowHTTP1 on cleartext). With TLS, ALPN makes the same choice inside one secure HTTP/2 server.
 */
export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const { deps, log } = opts;
  const limits = resolveServerLimits(opts.limits);
  let draining = false;
  // The agent surface (REST /api/*, PaymentPolicyService) shares one bound on requests in flight;
  // health checks, the dashboard and AdminService (operators, who must be able to suspend a
  // flooding agent) stay outside it.
  const admission = createGate(limits.maxInFlight, 'too many requests in flight', limits.maxInFlightPerOrg);
  const metrics = opts.metrics?.metrics;
  metrics?.countAdmitted(admission.inFlight, limits.maxInFlight);
  const restRoutes = createRestRoutes(deps, metrics);
  const restHandler = createRestHandler(deps, restRoutes, admission);
  const readiness = createReadiness(deps, opts.readiness);
  /** The context values of a request handed to connect-node (its contextValues hook gets only the request). */
  const rpcValues = new WeakMap<object, ContextValues>();
  const access = accessLog(log);
  /**
   * A request's route as a metrics label: a template or a fixed path, never the raw path. An /api/*
   * request is labelled by the REST handler with the route it matched (`route`), so its path is
   * matched once; one answered before it ran (storage failed) counts as unmatched.
   */
  const routeLabel = (path: string, route: string | undefined): string => {
    if (route !== undefined) return route;
    if (FIXED_ROUTES.has(path) || RPC_PATHS.has(path)) return path;
    if (path === '/dashboard' || path.startsWith('/dashboard/')) return '/dashboard/*';
    return 'unmatched';
  };

  /** /healthz (alive, and not stopped by a failed sync) and /readyz (readiness.ts). */
  const health = (path: '/healthz' | '/readyz', req: NodeRequest, res: NodeResponse): void => {
    if (draining && 'setHeader' in res && req.httpVersion === '1.1') res.setHeader('connection', 'close');
    if (path === '/healthz') {
      const failed = deps.store.failure() !== undefined;
      return sendJson(res, failed ? 503 : 200, { status: failed ? 'failed' : 'ok' });
    }
    const report = readiness.check(draining);
    return sendJson(res, report.status === 'unavailable' ? 503 : 200, report);
  };

  const services = createServices(deps, opts.adminTokenHash);
  // Input is judged before admission and authentication, as a body that does not parse already is.
  const interceptors = [
    domainErrorInterceptor, ...(metrics ? [metricsInterceptor(metrics)] : []), strictInputInterceptor, admissionInterceptor(admission, deps), failStopInterceptor(deps),
  ];
  // Unary gRPC and Connect calls are served by rpc/unaryHandler.ts (same answers, a fraction of
  // the CPU); connect-node serves the rest: gRPC-Web, Connect GET, streaming content types, 404s.
  const unary = createUnaryHandler({
    services, interceptors, jsonOptions: RPC_JSON_OPTIONS, readMaxBytes: MAX_RPC_MESSAGE_BYTES, acceptCompression: RPC_COMPRESSION, compressMinBytes: RPC_COMPRESS_MIN_BYTES,
    onFailure: (err, values) => values.get(requestLoggerKey)?.().error({ err }, 'rpc answer failed'),
  });
  const connect = connectNodeAdapter({
    routes: createRoutes(services),
    interceptors,
    jsonOptions: RPC_JSON_OPTIONS,
    readMaxBytes: MAX_RPC_MESSAGE_BYTES,
    acceptCompression: RPC_COMPRESSION,
    compressMinBytes: RPC_COMPRESS_MIN_BYTES,
    contextValues: (req) => rpcValues.get(req) ?? createContextValues(),
    fallback: (_req, res) => sendJson(res as NodeResponse, 404, { error: 'Not found', code: 'not_found' }),
  });

  const handler = (req: NodeRequest, res: NodeResponse): void => {
    // Health checks first, before any other work (no request id, log line or metrics), so that a
    // probe is answered as soon as its turn comes however loaded the server is.
    const path = (req.url ?? '/').split('?')[0]!.slice(0, 200);
    if (path === '/healthz' || path === '/readyz') return health(path, req, res);
    const started = process.hrtime.bigint();
    const reqId = randomUUID();
    // The request's child logger is made when something logs besides the access line.
    let reqLog: Logger | undefined;
    const requestLog = () => (reqLog ??= log.child({ reqId }));
    res.setHeader('x-request-id', reqId);
    let route: string | undefined;
    // Path only: query strings and headers never reach the log.
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      access({ reqId, method: req.method, path, status: res.statusCode, ms: Math.round(ms * 100) / 100, httpVersion: req.httpVersion });
      metrics?.observeRequest(routeLabel(path, route), res.statusCode, ms / 1000);
    });
    if (draining && 'setHeader' in res && req.httpVersion === '1.1') res.setHeader('connection', 'close');
    // Fail-stop after a failed sync: nothing is answered from a state that may not be on disk.
    const failed = deps.store.failure() !== undefined;
    // Scrapable after a failed sync too: nothing in it depends on what is on disk.
    if (path === '/metrics') return void serveMetrics(req, res, opts.metrics);
    // The contract is public (like the README): no credential, and it does not depend on storage.
    if (path === '/api/openapi.json') {
      if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { error: 'Method not allowed', code: 'method_not_allowed' }, { allow: 'GET, HEAD' });
      // HEAD too: the body gives the content-length, and Node writes no body for a HEAD request.
      return send(res, 200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache' }, OPENAPI_JSON);
    }
    if (failed) return sendJson(res, 503, STORAGE_FAILED);
    // A browser at the root is sent to the dashboard; API clients keep the JSON 404 below.
    if (path === '/' && (req.method === 'GET' || req.method === 'HEAD') && requestHeader(req, 'accept')?.includes('text/html')) {
      return send(res, 303, { location: '/dashboard', 'cache-control': 'no-store' });
    }
    if (path.startsWith('/api/')) {
      void restHandler(req, res, requestLog, (matched) => (route = matched));
      return;
    }
    const values = createContextValues().set(requestLoggerKey, requestLog);
    // RPC paths (/paypolicy.v1.…) and the dashboard's (/dashboard…) do not overlap.
    if (unary(req, res, (req.url ?? '').split('?', 1)[0]!, values)) return;
    if (opts.extraHandler?.(req, res, requestLog())) return;
    rpcValues.set(req, values);
    try {
      connect(req, res);
    } catch (err) {
      // connect-node makes each request's URL from its authority and throws, synchronously, when
      // there is none (HTTP/1.0 without Host) or it is not a host: uncaught, that stopped the process.
      // A client's mistake, answered 400 like any other and on the access line: at debug and
      // without a stack, so a 40-byte request cannot make the server write a kilobyte of warning.
      requestLog().debug({ reason: err instanceof Error ? err.message : String(err) }, 'rpc request refused before connect-node could read it');
      if (!res.headersSent) sendJson(res, 400, { error: 'Bad request: missing or malformed Host header', code: 'invalid_request' });
    }
  };

  const h1 = http.createServer(http1Timeouts(limits), handler);
  // h1 never listens itself (connections are handed to it), and Node only tracks an HTTP server's
  // connections (idle closing, header and request timeouts) from its 'listening' event on.
  h1.emit('listening');
  const unrouted = new Set<Socket>();
  const sessions = new Set<Http2Session>();
  const trackSession = (s: Http2Session) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  };
  let listener: net.Server;
  if (opts.tls) {
    const secure = http2.createSecureServer(
      { cert: opts.tls.cert, key: opts.tls.key, allowHTTP1: true, handshakeTimeout: headersTimeoutMs(limits), ...http2Settings(limits) },
      handler,
    );
    // HTTP/1.1 over TLS is served by the secure server itself, which reads these like http.Server.
    Object.assign(secure, http1Timeouts(limits));
    limitHttp2Sessions(secure, limits);
    secure.on('session', trackSession);
    listener = secure;
  } else {
    const h2 = http2.createServer(http2Settings(limits), handler);
    limitHttp2Sessions(h2, limits);
    h2.on('session', trackSession);
    listener = net.createServer((socket) => routeConnection(socket, h1, h2, unrouted, headersTimeoutMs(limits)));
  }
  capConnections(listener, limits, log);
  // Every accepted connection until it closes. Behind TLS, HTTP/1.1 is served by the secure server
  // itself: h1's cut-off does not reach it, and its own header and request deadlines stop when it
  // starts closing. What is left at the end of the grace period is cut off here, on every transport.
  const accepted = new Set<Socket>();
  listener.on('connection', (socket: Socket) => {
    accepted.add(socket);
    socket.once('close', () => accepted.delete(socket));
  });
  if (metrics) {
    const server = listener;
    metrics.countConnections(() => new Promise((resolve) => server.getConnections((err, n) => resolve(err ? 0 : n))));
    listener.on('drop', () => metrics.observeRefusedConnection());
  }

  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    // A deep accept queue (the kernel caps it at net.core.somaxconn): under a connection flood a
    // new connection, a health probe's included, waits in it for the next turn of the event loop
    // instead of being dropped and retried by the client's kernel 1, 3, 7… seconds later.
    listener.listen({ port: opts.port, host: opts.host, backlog: LISTEN_BACKLOG }, () => {
      listener.off('error', reject);
      resolve();
    });
  });
  const port = (listener.address() as net.AddressInfo).port;
  const scheme = opts.tls ? 'https' : 'http';
  const shownHost = opts.host.includes(':') ? `[${opts.host}]` : opts.host;

  return {
    port,
    url: `${scheme}://${shownHost}:${port}`,
    /** Stops accepting, lets in-flight requests finish (up to graceMs), then drops the rest. */
    async close(graceMs = 10_000) {
      draining = true;
      const closed = new Promise<void>((resolve) => listener.close(() => resolve()));
      // Nothing is in flight on a connection that has not even been routed yet.
      for (const socket of unrouted) socket.destroy();
      h1.closeIdleConnections();
      for (const s of sessions) s.close();
      // Connections that finish their last request while draining close right after it.
      const idle = setInterval(() => h1.closeIdleConnections(), 25);
      let deadline: NodeJS.Timeout | undefined;
      const expired = new Promise<void>((resolve) => (deadline = setTimeout(resolve, graceMs)));
      await Promise.race([closed, expired]);
      clearTimeout(deadline);
      clearInterval(idle);
      // Whatever is still running after the grace period is cut off, not answered later.
      h1.closeAllConnections();
      for (const s of sessions) s.destroy();
      for (const socket of accepted) socket.destroy();
      h1.close();
      await closed;
    },
  };
}

/**
 * Peeks at a cleartext connection until its first bytes either equal the HTTP/2 preface or
 * diverge from it, then gives the socket, bytes unread, to the right server. A connection that has
 * not been routed `deadlineMs` after it opened (silent, or trickling the preface) is dropped.
 */
function routeConnection(socket: Socket, h1: http.Server, h2: http2.Http2Server, unrouted: Set<Socket>, deadlineMs: number): void {
  let seen = Buffer.alloc(0);
  unrouted.add(socket);
  // A fixed deadline, not an inactivity timeout: a byte every few seconds must not keep it alive.
  const deadline = setTimeout(() => socket.destroy(), deadlineMs);
  socket.once('close', () => {
    clearTimeout(deadline);
    unrouted.delete(socket);
  });
  const onData = (chunk: Buffer) => {
    seen = Buffer.concat([seen, chunk]);
    const n = Math.min(seen.length, H2_PREFACE.length);
    const isPrefix = seen.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
    if (isPrefix && seen.length < H2_PREFACE.length) return;
    socket.off('data', onData);
    unrouted.delete(socket);
    // The chosen server applies its own timeouts from here on.
    clearTimeout(deadline);
    socket.pause();
    socket.unshift(seen);
    if (isPrefix) {
      // HTTP/2 reads the native handle directly and first drains what sits in the JS buffer;
      // resuming here would hand the preface to nobody.
      h2.emit('connection', socket);
    } else {
      h1.emit('connection', socket);
      socket.resume();
    }
  };
  socket.on('data', onData);
  socket.on('error', () => socket.destroy());
}

/**
 * /metrics. With a token configured, only `Authorization: Bearer <token>` reads it (401 otherwise),
 * from anywhere. Without one, only loopback clients do (403 otherwise): the counts describe the
 * business (payments, approvals), so they are not published to whoever can reach the port.
 */
async function serveMetrics(req: NodeRequest, res: NodeResponse, config: ServerOptions['metrics']): Promise<void> {
  if (!config) return sendJson(res, 404, { error: 'Not found', code: 'not_found' });
  if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { error: 'Method not allowed', code: 'method_not_allowed' }, { allow: 'GET, HEAD' });
  if (config.token !== undefined) {
    const given = parseBearer(requestHeader(req, 'authorization')) ?? '';
    // Compared as digests, in constant time: neither the length nor a prefix of the token leaks.
    const digest = (t: string) => createHash('sha256').update(t).digest();
    if (!timingSafeEqual(digest(given), digest(config.token))) {
      return sendJson(res, 401, { error: 'Invalid or missing metrics token', code: 'unauthenticated' }, { 'www-authenticate': 'Bearer' });
    }
  } else if (!isLoopbackAddress(req.socket?.remoteAddress)) {
    return sendJson(res, 403, { error: 'Metrics are served to loopback clients only; set --metrics-token to scrape from elsewhere', code: 'permission_denied' });
  }
  try {
    const text = await config.metrics.scrape();
    send(res, 200, { 'content-type': config.metrics.contentType, 'cache-control': 'no-store' }, text);
  } catch {
    if (!res.headersSent) sendJson(res, 500, { error: 'Internal error', code: 'internal' });
  }
}

/** A loopback peer (127.0.0.0/8, ::1, or either mapped into IPv6). */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return address === '::1' || /^127\.\d+\.\d+\.\d+$/.test(v4);
}

/**
 * A Sign request's payment type as REST would label it: its type, else the payload member that
 * chooses one, else unset (REST's label when `type` is left out).
 */
function signTypeLabel(m: SignRequest): string | undefined {
  if (m.type !== PaymentType.UNSPECIFIED) return PaymentType[m.type]?.toLowerCase();
  return m.payload.case === undefined ? undefined : SIGN_PAYLOAD_MEMBERS.find((f) => f.localName === m.payload.case)?.name;
}

/** PaymentPolicyService Sign and Quote outcomes, counted as REST counts them (observability/metrics.ts). */
function metricsInterceptor(metrics: Metrics): Interceptor {
  return (next) => async (req) => {
    const name = req.method.name;
    if (req.service.typeName !== PaymentPolicyService.typeName || (name !== 'Sign' && name !== 'Quote') || req.stream) return next(req);
    const type = name === 'Sign' ? signTypeLabel(req.message as SignRequest) : undefined;
    try {
      const res = await next(req);
      if (res.stream) return res;
      if (name === 'Quote') observeQuote(metrics, { message: res.message as QuoteResponse });
      else observeSign(metrics, type, { message: res.message as SignResponse });
      return res;
    } catch (error) {
      if (name === 'Quote') observeQuote(metrics, { error });
      else observeSign(metrics, type, { error });
      throw error;
    }
  };
}

/** Agent RPCs enter the admission gate after decoding (beyond it: Unavailable, `overloaded`); AdminService does not. */
function admissionInterceptor(gate: Gate, deps: AppDeps): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName !== PaymentPolicyService.typeName) return next(req);
    // The caller's organization, for its share of the gate; a credential that does not
    // authenticate enters without one and gets its 401 from the handler.
    let orgId: string | undefined;
    try {
      const principal = await authenticateApiKey(deps, req.header.get('authorization'));
      // The handler takes it from here instead of authenticating the same key again.
      req.contextValues.set(apiKeyPrincipalKey, principal);
      orgId = principal.orgId;
    } catch {
      orgId = undefined;
    }
    const release = gate.enter(orgId);
    try {
      return await next(req);
    } finally {
      release();
    }
  };
}

/** An answer computed while a sync was failing is replaced: it may rest on rows that are not on disk. */
function failStopInterceptor(deps: AppDeps): Interceptor {
  return (next) => async (req) => {
    const res = await next(req);
    if (deps.store.failure()) throw new ConnectError(STORAGE_FAILED.error, Code.Unavailable);
    return res;
  };
}
