/**
 * The request and response helpers every HTTP transport shares (REST, the dashboard, health):
 * the Node request/response types of HTTP/1.1 and HTTP/2 alike, one way to write an answer with
 * its length, and one bounded body reader.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';

export type NodeRequest = IncomingMessage | Http2ServerRequest;
export type NodeResponse = ServerResponse | Http2ServerResponse;
export type HeaderMap = OutgoingHttpHeaders;

/** Headers of every JSON answer: never cached, since each one is about live state. */
export const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' } as const;

/**
 * Writes a whole answer: the headers in the order given, then its content-length (0 without a body).
 * An HTTP/1.x answer to a request whose body readBody left half-read also says `Connection: close`
 * (the rest of that body may still be arriving, so the connection cannot carry another request),
 * whichever transport answers: REST, the dashboard, its sign-in.
 */
export function send(res: NodeResponse, status: number, headers: HeaderMap, body?: string | Buffer): void {
  const close = leftHalfRead(res) ? { connection: 'close' } : undefined;
  res.writeHead(status, { ...headers, ...close, 'content-length': body === undefined ? 0 : Buffer.byteLength(body) });
  if (body === undefined) res.end();
  else res.end(body);
}

const NO_HEADERS: HeaderMap = {};

/** A JSON answer; `headers` come after the JSON ones (and may replace them). */
export function sendJson(res: NodeResponse, status: number, body: unknown, headers: HeaderMap = NO_HEADERS): void {
  const text = JSON.stringify(body);
  // Most answers: the same three headers as send() would write, in one literal. Merged with
  // spreads it cost ~1 µs per answer: V8 builds `{ ...a, ...b, more }` on a slow path.
  if (headers === NO_HEADERS && !leftHalfRead(res)) {
    res.writeHead(status, { 'content-type': JSON_HEADERS['content-type'], 'cache-control': JSON_HEADERS['cache-control'], 'content-length': Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  send(res, status, { ...JSON_HEADERS, ...headers }, text);
}

/** One request header as a string (the first, if a client repeated it). */
export function requestHeader(req: NodeRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The body exceeded the reader's limit; the rest of it was not read. */
export class BodyTooLargeError extends Error {
  override name = 'BodyTooLargeError';
}

/** The client closed or reset the request before its whole body arrived: nobody is waiting for an answer. */
export class RequestClosedError extends Error {
  override name = 'RequestClosedError';
}

const abandoned = new WeakSet<object>();

/**
 * True when readBody stopped reading this answer's request half-way on HTTP/1.x: the rest may still
 * be arriving, so the connection cannot carry another request and must be closed after the answer.
 */
function leftHalfRead(res: NodeResponse): boolean {
  const req = (res as { req?: NodeRequest }).req;
  return req !== undefined && req.httpVersionMajor === 1 && abandoned.has(req);
}

/**
 * Reads the body up to `limit` bytes. A declared content-length over the limit is refused before
 * anything is read; a body that grows past it is refused as soon as it does, and the rest left
 * unread (the request paused: the answer can still be written, and send() closes an HTTP/1.x
 * connection after it). A client that goes away before the end rejects it with
 * RequestClosedError. Listeners rather than `for await`: the async iterator and its end-of-stream
 * watcher cost several µs of the event loop per request, for a body that is usually one chunk.
 */
export function readBody(req: NodeRequest, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new BodyTooLargeError());
  if (req.readableEnded) return Promise.resolve(Buffer.alloc(0));
  if (req.destroyed) return Promise.reject(new RequestClosedError('request closed before its body was read'));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (err?: Error) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      if (err) reject(err);
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        abandoned.add(req);
        settle(new BodyTooLargeError());
        req.pause();
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => settle();
    // A request stream fails only on the client's side (aborted, reset): the same as a close.
    const onError = (err: Error) => settle(new RequestClosedError(`request failed before its body was read: ${err.message}`, { cause: err }));
    const onClose = () => settle(new RequestClosedError('request closed before its body was read'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
