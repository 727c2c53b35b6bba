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

/** Writes a whole answer: the headers in the order given, then its content-length (0 without a body). */
export function send(res: NodeResponse, status: number, headers: HeaderMap, body?: string | Buffer): void {
  res.writeHead(status, { ...headers, 'content-length': body === undefined ? 0 : Buffer.byteLength(body) });
  if (body === undefined) res.end();
  else res.end(body);
}

/** A JSON answer; `headers` come after the JSON ones (and may replace them). */
export function sendJson(res: NodeResponse, status: number, body: unknown, headers: HeaderMap = {}): void {
  send(res, status, { ...JSON_HEADERS, ...headers }, JSON.stringify(body));
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

const abandoned = new WeakSet<object>();

/**
 * True when readBody stopped reading a body half-way: the rest may still be arriving, so an
 * HTTP/1.x connection cannot carry another request and must be closed after the answer.
 */
export function bodyAbandoned(req: NodeRequest): boolean {
  return abandoned.has(req);
}

/**
 * Reads the body up to `limit` bytes. A declared content-length over the limit is refused before
 * anything is read; a body that grows past it is refused as soon as it does, and left unread.
 */
export async function readBody(req: NodeRequest, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLargeError();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      abandoned.add(req);
      throw new BodyTooLargeError();
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
