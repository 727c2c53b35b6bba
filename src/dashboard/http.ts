import type { TLSSocket } from 'node:tls';
import { send, type HeaderMap, type NodeRequest, type NodeResponse } from '../http/io.js';
import type { Html } from './html.js';

export type { NodeRequest, NodeResponse } from '../http/io.js';

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

/** Set once as a dashboard request arrives, so whatever answers it (even a crash) carries them. */
export function setSecurityHeaders(res: NodeResponse): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
}

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

/** An HTML page; never cached, since every page shows one user's live data. */
export function sendHtml(res: NodeResponse, status: number, page: Html, extra: HeaderMap = {}): void {
  send(res, status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...extra }, `<!doctype html>\n${page.value}`);
}

/** A plain-text answer, never cached. */
export function sendText(res: NodeResponse, status: number, text: string, extra: HeaderMap = {}): void {
  send(res, status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', ...extra }, text);
}

/** 303 after a POST, so reloading the next page never repeats the change. */
export function redirect(res: NodeResponse, location: string, extra: HeaderMap = {}): void {
  send(res, 303, { location, 'cache-control': 'no-store', ...extra }, '');
}
