import { create, type DescMessage, type DescMethod, type DescMethodUnary, type DescService, type Message } from '@bufbuild/protobuf';
import {
  Code, ConnectError, createServiceImplSpec, type ContextValues, type HandlerContext, type Interceptor, type ServiceImpl,
  type UnaryRequest, type UnaryResponse,
} from '@connectrpc/connect';
import {
  compressionNegotiate, createAsyncIterable, createMethodSerializationLookup, encodeEnvelope, envelopeCompress, pipe, readAllBytes,
  transformDecompressEnvelope, transformParseEnvelope, transformSplitEnvelope, type Compression, type MethodSerializationLookup, type Serialization,
} from '@connectrpc/connect/protocol';
import {
  codeToHttpStatus, errorToJsonBytes, parseContentType as parseConnectContentType, parseTimeout as parseConnectTimeout, trailerMux,
} from '@connectrpc/connect/protocol-connect';
import {
  grpcStatusOk, parseContentType as parseGrpcContentType, parseTimeout as parseGrpcTimeout, setTrailerStatus,
} from '@connectrpc/connect/protocol-grpc';
import type { Http2ServerRequest } from 'node:http2';
import type { NodeRequest, NodeResponse } from '../http/io.js';
import { undeclaredJsonEnum } from './strictInput.js';

/**
 * Unary RPCs over gRPC and Connect (the JSON or protobuf POST), answered straight from the Node
 * request and response. connect-node serves every RPC through a chain of async iterables, abort
 * controllers and Fetch API objects, about 300 µs of CPU per call on the 2-core bench machine
 * (and a third of the garbage), which made a gRPC Sign cost twice a REST sign. This does the same
 * work in straight-line code for the calls that need nothing else, and leaves the rest to
 * connect-node (`false`): gRPC-Web, Connect GET and streaming content types, other methods and
 * unknown paths.
 *
 * What it is worth, measured with `node dist/bench/ab.js --line connect` (both builds up at once,
 * interleaved slices, 2 cores): with connect-node's adapter serving every RPC instead (strict
 * input, error mapping and the wire answers kept), Connect JSON Sign ran at 0.68x the rate on
 * 1.45x the server CPU per call, +146 µs of it on the main thread (207 against 353 µs); two
 * further runs on a machine loaded by other work gave 1.36x and 1.92x the CPU per call. The bar
 * for keeping a replacement of a library is 10 % on its bench line.
 *
 * The answers are connect-node's, byte for byte (test/rpc-wire.test.ts pins them): the same
 * interceptors run in the same order; parsing, serialization, compression negotiation, timeouts,
 * the gRPC trailers and the Connect error body all go through @connectrpc/connect's own exported
 * functions. A request body that is not exactly one whole, uncompressed gRPC frame (or a Connect
 * body that does not match its Content-Length) is read through connect's own envelope and body
 * readers, so framing and size errors keep their codes and texts too.
 *
 * The handler context is built lazily: its abort signal (tied to the request's end, the deadline
 * and the call's completion, like connect's) and its URL are made only when something reads them;
 * nothing in paypolicy's services does on the hot path.
 */

/** One service and its implementation, as given to `ConnectRouter.service`. */
export type ServiceRegistration = { service: DescService; impl: object };

export type UnaryHandlerOptions = {
  services: readonly ServiceRegistration[];
  /** Applied like connect's: the first is the outermost. */
  interceptors: readonly Interceptor[];
  /** How JSON request messages are read (connect-node's adapter takes the same). */
  jsonOptions: object;
  /** Largest message accepted, before and after decompression. */
  readMaxBytes: number;
  /** The request and response compressions offered (connect-node's default: gzip, br). */
  acceptCompression: readonly Compression[];
  /** Answers smaller than this are not compressed (connect's default: 1 KiB). */
  compressMinBytes: number;
  /** A call that failed outside the RPC (a write to a response that is gone): logged by the caller; the response is destroyed. */
  onFailure: (err: unknown, values: ContextValues) => void;
};

/** Serves `req` and returns true, or returns false without touching it (connect-node's turn). */
export type UnaryHandler = (req: NodeRequest, res: NodeResponse, pathname: string, values: ContextValues) => boolean;

type Method = {
  method: DescMethodUnary;
  service: DescService;
  impl: (request: unknown, context: HandlerContext) => unknown;
  serialization: MethodSerializationLookup<DescMessage, DescMessage>;
};

const UNLIMITED = 0xffffffff;
const GRPC_FRAME_HEADER = 5;

/** Builds the handler for every unary method of `services`. */
export function createUnaryHandler(opts: UnaryHandlerOptions): UnaryHandler {
  const methods = new Map<string, Method>();
  const limits = { readMaxBytes: opts.readMaxBytes, writeMaxBytes: UNLIMITED };
  for (const { service, impl } of opts.services) {
    // The same spec connect's router builds: bound methods, and Unimplemented for missing ones.
    const spec = createServiceImplSpec(service, impl as ServiceImpl<DescService>);
    for (const m of service.methods) {
      if (m.methodKind !== 'unary') continue;
      const implSpec = spec.methods[m.localName] as unknown as { impl: Method['impl'] };
      methods.set(`/${service.typeName}/${m.name}`, {
        method: m as DescMethodUnary, service, impl: implSpec.impl, serialization: createMethodSerializationLookup(m, undefined, opts.jsonOptions, limits),
      });
    }
  }
  const interceptors = [...opts.interceptors];
  const accept = [...opts.acceptCompression];

  return (req, res, pathname, values) => {
    if (req.method !== 'POST') return false;
    const m = methods.get(pathname);
    if (!m) return false;
    const type = req.headers['content-type'] ?? null;
    const grpc = parseGrpcContentType(type);
    const connect = grpc ? undefined : parseConnectContentType(type);
    if (!grpc && (!connect || connect.stream)) return false;
    const served = grpc ? serveGrpc(m, req, res, grpc.binary, values) : serveConnect(m, req, res, connect!.binary, values);
    served.catch((err: unknown) => {
      // Writing to a response the client already reset is not worth a line; anything else is.
      if ('stream' in res ? res.stream.destroyed : res.destroyed) return;
      opts.onFailure(err, values);
      res.destroy();
    });
    return true;
  };

  async function serveGrpc(m: Method, req: NodeRequest, res: NodeResponse, binary: boolean, values: ContextValues): Promise<void> {
    const header = webHeaders(req);
    const timeout = parseGrpcTimeout(header.get('grpc-timeout'), Number.MAX_SAFE_INTEGER);
    const ctx = new Call(m, req, res, header, values, 'grpc', timeout.timeoutMs);
    ctx.responseHeader.set('content-type', binary ? 'application/grpc+proto' : 'application/grpc+json');
    ctx.responseTrailer.set('grpc-status', grpcStatusOk);
    const compression = compressionNegotiate(accept, header.get('grpc-encoding'), header.get('grpc-accept-encoding'), 'grpc-accept-encoding');
    if (compression.response) ctx.responseHeader.set('grpc-encoding', compression.response.name);
    let body: Uint8Array | undefined;
    try {
      if (compression.error) throw compression.error;
      if (timeout.error) throw timeout.error;
      const input = await readGrpcMessage(req, asInput(m.serialization.getI(binary), m.method.input, binary), compression.request, opts.readMaxBytes);
      const output = await invoke(m, ctx, input);
      const frame = await envelopeCompress({ flags: 0, data: m.serialization.getO(binary).serialize(output) }, compression.response, opts.compressMinBytes);
      body = encodeEnvelope(frame.flags, frame.data);
      ctx.abort();
    } catch (e) {
      if (e instanceof RequestGone) return;
      ctx.abort(e);
      setTrailerStatus(ctx.responseTrailer, asConnectError(e));
    }
    // The trailers carry the status, success or not (never a trailers-only answer).
    res.writeHead(200, nodeHeaders(ctx.responseHeader));
    res.addTrailers(nodeHeaders(ctx.responseTrailer));
    if (body) res.end(body);
    else res.end();
  }

  async function serveConnect(m: Method, req: NodeRequest, res: NodeResponse, binary: boolean, values: ContextValues): Promise<void> {
    const header = webHeaders(req);
    const timeout = parseConnectTimeout(header.get('connect-timeout-ms'), Number.MAX_SAFE_INTEGER);
    const ctx = new Call(m, req, res, header, values, 'connect', timeout.timeoutMs);
    ctx.responseHeader.set('content-type', binary ? 'application/proto' : 'application/json');
    const compression = compressionNegotiate(accept, header.get('content-encoding'), header.get('accept-encoding'), 'accept-encoding');
    let status = 200;
    let body: Uint8Array;
    try {
      if (compression.error) throw compression.error;
      if (timeout.error) throw timeout.error;
      let bytes = await readConnectBody(req, opts.readMaxBytes, header.get('content-length'));
      if (compression.request) bytes = await decompressInput(compression.request, bytes, opts.readMaxBytes);
      const output = await invoke(m, ctx, asInput(m.serialization.getI(binary), m.method.input, binary).parse(bytes));
      body = m.serialization.getO(binary).serialize(output);
      ctx.abort();
    } catch (e) {
      if (e instanceof RequestGone) return;
      ctx.abort(e);
      const error = asConnectError(e);
      status = codeToHttpStatus(error.code);
      ctx.responseHeader.set('content-type', 'application/json');
      error.metadata.forEach((value, key) => ctx.responseHeader.set(key, value));
      body = errorToJsonBytes(error, undefined);
    }
    if (compression.response && body.byteLength >= opts.compressMinBytes) {
      body = await compression.response.compress(body);
      ctx.responseHeader.set('content-encoding', compression.response.name);
    }
    // Unary Connect sends trailers as `trailer-`-prefixed headers.
    const head = trailerMux(ctx.responseHeader, ctx.responseTrailer);
    head.set('content-length', String(body.byteLength));
    res.writeHead(status, nodeHeaders(head));
    res.end(body);
  }

  /** The interceptors around the implementation, as connect runs them for a unary call. */
  async function invoke(m: Method, ctx: Call, message: unknown): Promise<UnaryResponse['message']> {
    const last = async (r: UnaryRequest): Promise<UnaryResponse> => {
      const output = await m.impl(r.message, r === request ? ctx : ctx.withRequest(r));
      return {
        stream: false, message: create(m.method.output, output as never), method: m.method as never, service: m.service,
        header: ctx.responseHeader, trailer: ctx.responseTrailer,
      };
    };
    const request = ctx.request(message);
    const next = interceptors.reduceRight<(r: UnaryRequest) => Promise<UnaryResponse>>(
      (inner, interceptor) => interceptor(inner as never) as never, last,
    );
    const response = await next(request);
    replaceHeaders(ctx.responseHeader, response.header);
    replaceHeaders(ctx.responseTrailer, response.trailer);
    return response.message;
  }
}

/** The request went away before it was read in full: there is no one left to answer. */
class RequestGone extends Error {}

/**
 * A body that is not its method's input (malformed protobuf or JSON, a corrupt compressed body) is
 * the caller's error: invalid_argument (Connect 400, gRPC status 3), never internal (500), which
 * connect's own parser reports for binary messages and which would read as our failure.
 */
function notTheInput(e: unknown): ConnectError {
  if (e instanceof ConnectError && e.code !== Code.Internal) return e;
  const reason = e instanceof ConnectError ? e.rawMessage : e instanceof Error ? e.message : String(e);
  return new ConnectError(`invalid request message: ${reason}`, Code.InvalidArgument);
}

function asInput<T extends Message>(serialization: Serialization<T>, desc: DescMessage, binary: boolean): Serialization<T> {
  return {
    serialize: (value) => serialization.serialize(value),
    parse(bytes) {
      try {
        return serialization.parse(bytes);
      } catch (e) {
        const field = binary ? undefined : undeclaredJsonEnum(desc, utf8.decode(bytes));
        throw field === undefined ? notTheInput(e) : new ConnectError(`invalid request message: ${field}`, Code.InvalidArgument);
      }
    },
  };
}

const utf8 = new TextDecoder();

async function decompressInput(compression: Compression, bytes: Uint8Array, readMaxBytes: number): Promise<Uint8Array> {
  try {
    return await compression.decompress(bytes, readMaxBytes);
  } catch (e) {
    throw notTheInput(e);
  }
}

function asConnectError(e: unknown): ConnectError {
  return e instanceof ConnectError ? e : new ConnectError('internal error', Code.Internal, undefined, undefined, e);
}

/**
 * The one message of a unary gRPC request. The common body, one uncompressed frame holding the
 * whole message, is decoded here; anything else goes through connect's envelope reader over the
 * same bytes (and the rest of the stream), which gives connect's answer for it.
 */
async function readGrpcMessage(req: NodeRequest, input: Serialization<Message>, compression: Compression | null, readMaxBytes: number): Promise<Message> {
  const body = await readUpTo(req, readMaxBytes + GRPC_FRAME_HEADER);
  if (body.ended && body.length >= GRPC_FRAME_HEADER) {
    const bytes = body.chunks.length === 1 ? body.chunks[0]! : Buffer.concat(body.chunks, body.length);
    if (bytes[0] === 0 && bytes.readUInt32BE(1) === body.length - GRPC_FRAME_HEADER) return input.parse(bytes.subarray(GRPC_FRAME_HEADER));
  }
  const messages = pipe(
    bodySource(req, body),
    transformSplitEnvelope(readMaxBytes),
    transformDecompressEnvelope(compression, readMaxBytes),
    transformParseEnvelope(input),
  )[Symbol.asyncIterator]();
  const first = await messages.next();
  if (first.done) throw new ConnectError('protocol error: missing input message for unary method', Code.Unimplemented);
  const second = await messages.next();
  if (!second.done) throw new ConnectError('protocol error: received extra input message for unary method', Code.Unimplemented);
  return first.value;
}

/** A Connect unary body: read here when it matches its Content-Length (if any) and the limit, else by connect's reader. */
async function readConnectBody(req: NodeRequest, readMaxBytes: number, contentLength: string | null): Promise<Uint8Array> {
  const declared = contentLength === null ? NaN : parseInt(contentLength, 10);
  const hinted = Number.isSafeInteger(declared) && declared >= 0;
  if (!hinted || declared <= readMaxBytes) {
    const body = await readUpTo(req, hinted ? declared : readMaxBytes);
    if (body.ended && (!hinted || body.length === declared)) return body.chunks.length === 1 ? body.chunks[0]! : Buffer.concat(body.chunks, body.length);
    return readAllBytes(bodySource(req, body), readMaxBytes, contentLength);
  }
  return readAllBytes(bodySource(req, { chunks: [], length: 0, ended: false }), readMaxBytes, contentLength);
}

type PartialBody = { chunks: Buffer[]; length: number; ended: boolean };

/**
 * Reads until the body ends or more than `limit` bytes have arrived (then the stream is paused
 * with the rest unread). Rejects with RequestGone if the request is aborted first.
 */
function readUpTo(req: NodeRequest, limit: number): Promise<PartialBody> {
  return new Promise((resolve, reject) => {
    const body: PartialBody = { chunks: [], length: 0, ended: false };
    const done = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('aborted', onGone);
    };
    const onData = (chunk: Buffer) => {
      body.chunks.push(chunk);
      body.length += chunk.length;
      if (body.length > limit) {
        done();
        req.pause();
        resolve(body);
      }
    };
    const onEnd = () => {
      done();
      body.ended = true;
      resolve(body);
    };
    const onGone = () => {
      done();
      reject(new RequestGone());
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onGone);
    req.once('aborted', onGone);
  });
}

/** What was read so far, then the rest of the stream, as connect's readers take a body. */
function bodySource(req: NodeRequest, body: PartialBody): AsyncIterable<Uint8Array> {
  if (body.ended) return createAsyncIterable(body.chunks);
  return (async function* () {
    yield* body.chunks;
    yield* req as AsyncIterable<Buffer>;
  })();
}

/** The request headers as connect's handlers see them (HTTP/2 pseudo-headers left out). */
function webHeaders(req: NodeRequest): Headers {
  const h = new Headers();
  const raw = req.headers;
  for (const name in raw) {
    if (name.charCodeAt(0) === 58 /* ':' */) continue;
    const v = raw[name];
    if (typeof v === 'string') h.append(name, v);
    else if (Array.isArray(v)) for (const one of v) h.append(name, one);
    else if (v !== undefined) h.append(name, String(v));
  }
  return h;
}

/** Fetch API headers → Node's header object (repeated names as arrays). */
function nodeHeaders(h: Headers): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  h.forEach((value, key) => {
    const seen = out[key];
    out[key] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  });
  return out;
}

/** Makes `target` hold exactly what `source` holds (an interceptor may answer with headers of its own). */
function replaceHeaders(target: Headers, source: Headers): void {
  if (source === target) return;
  for (const key of [...target.keys()]) target.delete(key);
  source.forEach((value, key) => target.set(key, value));
}

/**
 * The HandlerContext of one call, and the UnaryRequest the interceptors see. Its signal aborts
 * when the request goes away, when the deadline passes, or when the call ends (connect's three
 * reasons); the controller, its listeners and the deadline timer exist only once someone asks for
 * the signal.
 */
class Call implements HandlerContext {
  readonly method: DescMethod;
  readonly service: DescService;
  readonly requestMethod = 'POST';
  readonly responseHeader = new Headers();
  readonly responseTrailer = new Headers();
  readonly timeoutMs: () => number | undefined;
  private controller: AbortController | undefined;
  private finished: { reason: unknown } | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;

  constructor(
    m: Method,
    private readonly req: NodeRequest,
    private readonly res: NodeResponse,
    readonly requestHeader: Headers,
    readonly values: ContextValues,
    readonly protocolName: 'grpc' | 'connect',
    private readonly deadlineMs: number | undefined,
  ) {
    this.method = m.method;
    this.service = m.service;
    const deadline = deadlineMs === undefined ? undefined : Date.now() + deadlineMs;
    this.timeoutMs = () => (deadline === undefined ? undefined : deadline - Date.now());
  }

  get url(): string {
    const scheme = 'encrypted' in this.req.socket && this.req.socket.encrypted ? 'https' : 'http';
    const authority = 'authority' in this.req ? (this.req as Http2ServerRequest).authority : this.req.headers.host;
    return new URL(this.req.url ?? '', `${scheme}://${authority ?? 'localhost'}`).toString();
  }

  get signal(): AbortSignal {
    if (this.controller) return this.controller.signal;
    const controller = (this.controller = new AbortController());
    if (this.finished) {
      controller.abort(this.finished.reason);
      return controller.signal;
    }
    // HTTP/2 ends a stream once; HTTP/1.1 reports the request's close when its body is read, so the response's close is the one to watch.
    const watched = ('stream' in this.req ? this.req : this.res) as NodeJS.EventEmitter & { closed?: boolean };
    if (watched.closed) this.abortWith(undefined);
    else watched.once('close', () => this.abortWith(undefined));
    this.req.once('error', () => this.abortWith(new ConnectError('the request was aborted', Code.Aborted)));
    if (this.deadlineMs !== undefined) {
      this.deadlineTimer = setTimeout(() => this.abortWith(new ConnectError('the operation timed out', Code.DeadlineExceeded)), Math.max(0, this.timeoutMs()!));
      this.deadlineTimer.unref?.();
    }
    return controller.signal;
  }

  /** Ends the call: the signal (if anyone made it) aborts with `reason`. */
  abort(reason?: unknown): void {
    this.finished ??= { reason };
    this.abortWith(reason);
  }

  private abortWith(reason: unknown): void {
    clearTimeout(this.deadlineTimer);
    if (this.controller && !this.controller.signal.aborted) this.controller.abort(reason);
  }

  /** The interceptors' view of this call, carrying `message`. */
  request(message: unknown): UnaryRequest {
    const call = this;
    return {
      stream: false, message: message as never, method: this.method as never, service: this.service, requestMethod: 'POST',
      header: this.requestHeader, contextValues: this.values,
      get url() {
        return call.url;
      },
      get signal() {
        return call.signal;
      },
    };
  }

  /** The context for an implementation called with a request an interceptor replaced. */
  withRequest(r: UnaryRequest): HandlerContext {
    const call = this;
    return {
      method: this.method, service: r.service, requestMethod: this.requestMethod, protocolName: this.protocolName,
      requestHeader: r.header, responseHeader: this.responseHeader, responseTrailer: this.responseTrailer, values: r.contextValues,
      timeoutMs: this.timeoutMs,
      get url() {
        return call.url;
      },
      get signal() {
        return r.signal;
      },
    };
  }
}
