import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import type { Html } from './html.js';

export type NodeRequest = IncomingMessage | Http2ServerRequest;
export type NodeResponse = ServerResponse | Http2ServerResponse;

/** The CSP allows only this origin's own script and style files: no inline code of any kind. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** Sent with every dashboard response, pages, JSON, CSV and static files alike. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

/** Cookies of the request; a malformed pair is skipped rather than failing the request. */
export function readCookies(req: NodeRequest): Map<string, string> {
  const out = new Map<string, string>();
  const header = req.headers.cookie;
  if (!header) return out;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 1) continue;
    const name = pair.slice(0, eq).trim();
    try {
      if (!out.has(name)) out.set(name, decodeURIComponent(pair.slice(eq + 1).trim()));
    } catch {
      // undecodable value: treated as absent
    }
  }
  return out;
}

/** True when the request reached this process over TLS (then cookies get `Secure`). */
export function isTls(req: NodeRequest): boolean {
  return (req.socket as TLSSocket | undefined)?.encrypted === true;
}

/** A cookie scoped to the dashboard: never readable by scripts, never sent by other sites. */
export function cookie(req: NodeRequest, name: string, value: string, maxAgeSeconds: number): string {
  const secure = isTls(req) ? '; Secure' : '';
  return `${name}=${value}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure}`;
}

/** The body exceeded the limit; the rest of it was not read. */
export class BodyTooLargeError extends Error {
  override name = 'BodyTooLargeError';
}

/** Reads a body up to `limit` bytes; stops reading as soon as it is exceeded. */
export async function readBodyLimited(req: NodeRequest, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLargeError();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLargeError();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function send(res: NodeResponse, status: number, headers: Record<string, string | string[]>, body: string | Buffer): void {
  const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  res.writeHead(status, { ...SECURITY_HEADERS, ...headers, 'content-length': String(payload.length) });
  res.end(payload);
}

/** An HTML page; never cached, since every page shows one user's live data. */
export function sendHtml(res: NodeResponse, status: number, page: Html, extra: Record<string, string | string[]> = {}): void {
  send(res, status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...extra }, `<!doctype html>\n${page.value}`);
}

/** A JSON answer, never cached. */
export function sendJson(res: NodeResponse, status: number, body: unknown): void {
  send(res, status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' }, JSON.stringify(body));
}

/** A plain-text answer, never cached. */
export function sendText(res: NodeResponse, status: number, text: string, extra: Record<string, string> = {}): void {
  send(res, status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', ...extra }, text);
}

/** 303 after a POST, so reloading the next page never repeats the change. */
export function redirect(res: NodeResponse, location: string, extra: Record<string, string | string[]> = {}): void {
  send(res, 303, { location, 'cache-control': 'no-store', ...extra }, '');
}

/** The stylesheet or script, revalidated by ETag (their URLs also carry a version). */
export function sendAsset(req: NodeRequest, res: NodeResponse, asset: { body: Buffer; etag: string; contentType: string }): void {
  if (req.headers['if-none-match'] === asset.etag) {
    res.writeHead(304, { ...SECURITY_HEADERS, etag: asset.etag, 'cache-control': 'no-cache' });
    res.end();
    return;
  }
  send(res, 200, { 'content-type': asset.contentType, etag: asset.etag, 'cache-control': 'no-cache' }, asset.body);
}
