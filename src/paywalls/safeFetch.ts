import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { DomainError, invalidArgument } from '../domain/errors.js';
import { isBlockedAddress, isBlockedHostname } from './addressPolicy.js';
import type { ProbeResult } from './offer.js';
import type { Gate } from '../overload/admission.js';

/**
 * The one outbound HTTP client of paypolicy. Quote and sign probe URLs that callers choose, so
 * every hop is checked (scheme, credentials, host literal, every resolved address) before a socket
 * opens, and the socket connects to the address that was checked: the name is never resolved twice,
 * which leaves no DNS-rebinding window. Every failure is a DomainError whose message is safe to
 * send back; the low-level error is kept only as `cause`.
 */

/** Resolves a hostname to all its addresses, like `dns.lookup(name, { all: true })`. */
export type ProbeLookup = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

/** How a probe may reach the network and how much it may spend doing so. */
export type SafeFetchOptions = {
  /** Also allow http:// (development only); https:// is always allowed. */
  allowHttp: boolean;
  /** Test-only `host:port` entries (e.g. `127.0.0.1:43123`) exempt from the private-address block; empty in production. */
  allowHosts: ReadonlySet<string>;
  /** DNS resolver; defaults to the system resolver. */
  lookup?: ProbeLookup;
  /** Time to open the connection (including the TLS handshake), per hop. */
  connectTimeoutMs: number;
  /** Time for the whole probe: DNS, every redirect hop and the body. */
  totalTimeoutMs: number;
  /** Largest response body read; a longer body fails the probe. */
  maxBodyBytes: number;
  /** Redirects followed before the probe fails. */
  maxRedirects: number;
  /** Largest response header block; defaults to 16 KiB. */
  maxHeaderBytes?: number;
  /**
   * Bound on probes in flight at once, with a share per organization: a probe beyond it, or beyond
   * its tenant's share, is refused (`overloaded`) before any network work, so one organization's
   * slow paywalls always leave slots to the others.
   */
  slots?: Gate;
};

/**
 * A probe's answer plus the URLs it took to get there: `chain[0]` is the URL asked for, each later
 * entry a redirect target, and the last one (always equal to `url`) the URL that answered. Whoever
 * vouches for a URL must vouch for every hop of this chain, not only for the first.
 */
export type SafeFetchResult = ProbeResult & { chain: string[] };

/**
 * The request a probe sends. `headers` are dropped when a redirect leaves the original origin.
 * `tenant` (an organization id) is whose share of the probe slots it takes (overload/admission.ts Gate).
 */
export type SafeFetchInit = { method: 'GET' | 'POST'; headers?: Record<string, string>; body?: string; tenant?: string };

/** Production defaults: https only, no exemptions, 3 s connect, 8 s total, 256 KiB body, 3 redirects. */
export const defaultSafeFetchOptions: SafeFetchOptions = {
  allowHttp: false,
  allowHosts: new Set<string>(),
  connectTimeoutMs: 3_000,
  totalTimeoutMs: 8_000,
  maxBodyBytes: 256 * 1024,
  maxRedirects: 3,
  maxHeaderBytes: 16 * 1024,
};

const INVALID_URL = 'Invalid URL';
/**
 * The longest URL probed, in characters. The URL asked for is stored with its payment (twice: the
 * resource_url column and the request), so it is bounded like the challenge (oversizedOffer.ts);
 * real resource URLs are far shorter, and many servers refuse request lines past 8 KiB anyway.
 */
export const MAX_URL_CHARS = 8_192;
const BLOCKED_HOST = 'URL is not allowed (private/loopback hosts blocked)';
const BAD_SCHEME = 'URL is not allowed (only https:// URLs can be probed)';
const CREDENTIALS = 'URL is not allowed (credentials in URL)';

const DEFAULT_HEADERS: Readonly<Record<string, string>> = {
  accept: 'application/json',
  'user-agent': 'paypolicy-probe/1',
  // The parsers need the bytes as sent; a compressed body would only waste the size budget.
  'accept-encoding': 'identity',
};

/** Headers this client owns: a caller's value would desynchronize framing or routing. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer']);

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * Checks a URL without touching the network: it must be at most MAX_URL_CHARS long, parse as an
 * absolute URL, use https (or http when allowed), carry no credentials, and not name a private,
 * loopback or local-only host unless its `host:port` is in `allowHosts`. Returns the parsed URL.
 */
export function checkUrl(url: string, options: Pick<SafeFetchOptions, 'allowHttp' | 'allowHosts'>): URL {
  if (typeof url === 'string' && url.length > MAX_URL_CHARS) throw invalidArgument(`${INVALID_URL} (longer than ${MAX_URL_CHARS} characters)`, 'invalid_url');
  let parsed: URL;
  try {
    // No base URL: relative and scheme-less input fails here rather than resolving against anything.
    parsed = new URL(typeof url === 'string' ? url : '');
  } catch {
    throw invalidArgument(INVALID_URL, 'invalid_url');
  }
  const webScheme = parsed.protocol === 'https:' || parsed.protocol === 'http:';
  if (!webScheme) throw invalidArgument(BAD_SCHEME, 'url_not_allowed');
  if (parsed.username !== '' || parsed.password !== '') throw invalidArgument(CREDENTIALS, 'url_not_allowed');
  // The host is judged before http-vs-https so a private host gets the reason that names the real problem.
  if (!isExempt(parsed, options.allowHosts) && isBlockedHostname(parsed.hostname)) {
    throw invalidArgument(BLOCKED_HOST, 'url_not_allowed');
  }
  if (parsed.protocol === 'http:' && !options.allowHttp) throw invalidArgument(BAD_SCHEME, 'url_not_allowed');
  return parsed;
}

/**
 * Fetches a URL for the probe: checks every hop, follows at most `maxRedirects` redirects, bounds
 * time and sizes, and returns the final response whatever its status (the caller interprets 402, 405…)
 * with the chain of URLs it followed.
 */
export async function safeFetch(url: string, init: SafeFetchInit, options: SafeFetchOptions): Promise<SafeFetchResult> {
  let current = checkUrl(url, options);
  const release = options.slots?.enter(init.tenant);
  const chain = [current.href];
  const origin = current.origin;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), options.totalTimeoutMs);
  let method = init.method;
  let body = init.body;
  let headers = requestHeaders(init.headers);
  try {
    for (let redirects = 0; ; redirects++) {
      const addresses = await resolveChecked(current, options, deadline.signal);
      const res = await sendOnce(current, { method, headers, body }, addresses, options, deadline.signal);
      if (res.kind === 'final') return { status: res.status, headers: res.headers, body: res.body, url: current.href, chain };
      if (redirects >= options.maxRedirects) throw unreachable('too many redirects');
      current = nextHop(current, res.location, options);
      chain.push(current.href);
      // 303 always becomes GET; 301/302 after POST do too, as browsers do. The body goes with the POST.
      if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
      // Once the chain leaves the first origin, the caller's headers (payment credentials) and body
      // stay behind for the rest of the chain, even if it comes back.
      if (current.origin !== origin) {
        headers = crossOriginHeaders(init.headers);
        body = undefined;
      }
    }
  } finally {
    clearTimeout(timer);
    release?.();
  }
}

function nextHop(from: URL, location: string, options: SafeFetchOptions): URL {
  let next: URL;
  try {
    next = new URL(location, from);
  } catch {
    throw unreachable('invalid redirect location');
  }
  return checkUrl(next.href, options);
}

/** Default headers plus the caller's, minus the ones this client must control itself. */
function requestHeaders(custom: Record<string, string> | undefined): Record<string, string> {
  const headers: Record<string, string> = { ...DEFAULT_HEADERS };
  for (const [name, value] of Object.entries(custom ?? {})) {
    const key = name.toLowerCase();
    if (!RESERVED_HEADERS.has(key)) headers[key] = value;
  }
  return headers;
}

/** What another origin may see: the defaults, with only the caller's accept and user-agent kept. */
function crossOriginHeaders(custom: Record<string, string> | undefined): Record<string, string> {
  const headers: Record<string, string> = { ...DEFAULT_HEADERS };
  for (const [name, value] of Object.entries(custom ?? {})) {
    const key = name.toLowerCase();
    if (key === 'accept' || key === 'user-agent') headers[key] = value;
  }
  return headers;
}

function isExempt(url: URL, allowHosts: ReadonlySet<string>): boolean {
  if (allowHosts.size === 0) return false;
  const port = url.port !== '' ? url.port : url.protocol === 'https:' ? '443' : '80';
  return allowHosts.has(`${url.hostname}:${port}`);
}

type Resolved = Array<{ address: string; family: 4 | 6 }>;

/** Resolves the hop's host once and checks every address; a literal IP needs no lookup. */
async function resolveChecked(url: URL, options: SafeFetchOptions, signal: AbortSignal): Promise<Resolved | undefined> {
  const host = bareHost(url);
  if (isIP(host) !== 0) return undefined;
  const lookup = options.lookup ?? systemLookup;
  let addresses: Resolved;
  try {
    addresses = await untilAborted(lookup(host), signal);
  } catch (err) {
    if (err instanceof DomainError) throw err; // the deadline passed while resolving
    throw unreachable('DNS lookup failed', err);
  }
  if (addresses.length === 0 || addresses.some((a) => isIP(a.address) !== a.family)) throw unreachable('DNS lookup failed');
  // One bad address is enough: the connection could land on any of them.
  if (!isExempt(url, options.allowHosts) && addresses.some((a) => isBlockedAddress(a.address))) {
    throw invalidArgument(BLOCKED_HOST, 'url_not_allowed');
  }
  return addresses;
}

async function systemLookup(hostname: string): Promise<Resolved> {
  const found = await dnsLookup(hostname, { all: true, verbatim: true });
  return found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(unreachable('request timed out'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(unreachable('request timed out'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** Hands the socket the addresses that were already checked, so it never asks DNS again. */
function pinnedLookup(addresses: Resolved): LookupFunction {
  return (_hostname, opts, callback) => {
    const usable = opts.family === 4 || opts.family === 6 ? addresses.filter((a) => a.family === opts.family) : addresses;
    if (opts.all) {
      callback(null, usable.map((a) => ({ address: a.address, family: a.family })));
      return;
    }
    const first = usable[0];
    if (first) callback(null, first.address, first.family);
    else callback(Object.assign(new Error('no checked address for this family'), { code: 'ENOTFOUND' }), '', 0);
  };
}

function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

type HopResult =
  | { kind: 'final'; status: number; headers: Record<string, string>; body: Buffer }
  | { kind: 'redirect'; status: number; location: string };

function sendOnce(
  url: URL,
  req: { method: 'GET' | 'POST'; headers: Record<string, string>; body: string | undefined },
  addresses: Resolved | undefined,
  options: SafeFetchOptions,
  signal: AbortSignal,
): Promise<HopResult> {
  return new Promise<HopResult>((resolve, reject) => {
    if (signal.aborted) {
      reject(unreachable('request timed out'));
      return;
    }
    const secure = url.protocol === 'https:';
    const host = bareHost(url);
    // Only POST carries a body: a GET body would go out chunked and confuse servers and caches.
    const payload = req.method === 'POST' && req.body !== undefined ? Buffer.from(req.body, 'utf8') : undefined;
    const headers = { ...req.headers };
    if (req.method === 'POST') headers['content-length'] = String(payload?.length ?? 0);

    let request: http.ClientRequest | undefined;
    let settled = false;
    const finish = (err: DomainError | undefined, result?: HopResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      signal.removeEventListener('abort', onAbort);
      if (err) {
        request?.destroy();
        reject(err);
      } else if (result) {
        resolve(result);
      }
    };
    const onAbort = () => finish(unreachable('request timed out'));
    const connectTimer = setTimeout(() => finish(unreachable('connect timed out')), options.connectTimeoutMs);
    signal.addEventListener('abort', onAbort, { once: true });

    const requestOptions: https.RequestOptions = {
      protocol: url.protocol,
      hostname: host,
      port: url.port === '' ? undefined : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: req.method,
      headers,
      // A fresh agent per hop: a pooled socket could be connected to an address this hop did not check.
      agent: false,
      maxHeaderSize: options.maxHeaderBytes ?? defaultSafeFetchOptions.maxHeaderBytes,
    };
    if (addresses) requestOptions.lookup = pinnedLookup(addresses);
    // SNI and certificate checks use the name; RFC 6066 forbids an IP literal as server name.
    if (secure && isIP(host) === 0) requestOptions.servername = host.replace(/\.+$/, '');

    try {
      request = (secure ? https : http).request(requestOptions);
    } catch (err) {
      settled = true;
      clearTimeout(connectTimer);
      signal.removeEventListener('abort', onAbort);
      reject(err);
      return;
    }
    request.once('socket', (socket) => {
      socket.once(secure ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer));
    });
    request.on('error', (err) => finish(unreachable(describeNetworkError(err), err)));
    request.once('response', (res) => {
      res.on('error', (err) => finish(unreachable(describeNetworkError(err), err)));
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (REDIRECTS.has(status) && typeof location === 'string') {
        // Nothing in a redirect's body matters; the socket is not reused, so drop it now.
        finish(undefined, { kind: 'redirect', status, location });
        res.destroy();
        return;
      }
      // Only a 402's body can hold a challenge. Any other answer is reported by its status alone,
      // so its body is not read at all, however large it is.
      if (status !== 402) {
        finish(undefined, { kind: 'final', status, headers: joinHeaders(res.rawHeaders), body: Buffer.alloc(0) });
        res.destroy();
        return;
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBodyBytes) {
        finish(unreachable('response body too large'));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > options.maxBodyBytes) finish(unreachable('response body too large'));
        else chunks.push(chunk);
      });
      res.once('close', () => {
        if (!res.complete) finish(unreachable('connection closed before the response ended'));
      });
      res.once('end', () => finish(undefined, { kind: 'final', status, headers: joinHeaders(res.rawHeaders), body: Buffer.concat(chunks, size) }));
    });
    request.end(payload);
  });
}

/** Lowercase names; repeated lines joined with ", " in arrival order (set-cookie included). */
function joinHeaders(raw: string[]): Record<string, string> {
  // A Map, not an object literal: names such as `__proto__` or `constructor` come from the server.
  const joined = new Map<string, string>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] ?? '').toLowerCase();
    const value = raw[i + 1] ?? '';
    const previous = joined.get(name);
    joined.set(name, previous === undefined ? value : `${previous}, ${value}`);
  }
  return Object.fromEntries(joined);
}

function unreachable(detail: string, cause?: unknown): DomainError {
  return new DomainError('invalid_argument', `Could not reach URL: ${detail}`, { code: 'unreachable', cause });
}

/** A short, fixed phrase per failure: raw messages can carry addresses and stack details. */
function describeNetworkError(err: unknown): string {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : '';
  switch (code) {
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_FAIL':
    case 'ENODATA':
      return 'DNS lookup failed';
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
    case 'EPIPE':
      return 'connection reset';
    case 'ETIMEDOUT':
      return 'connect timed out';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'EADDRNOTAVAIL':
      return 'host unreachable';
    case 'HPE_HEADER_OVERFLOW':
      return 'response headers too large';
    case 'EPROTO':
      // OpenSSL's own text names files and line numbers; the code says enough.
      return 'TLS error';
  }
  if (code.startsWith('HPE_')) return 'invalid HTTP response';
  if (/^(ERR_SSL_|ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/.test(code)) return `TLS error (${code})`;
  if (err instanceof Error && /socket hang up/i.test(err.message)) return 'connection reset';
  return 'network error';
}
