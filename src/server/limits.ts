import { readFileSync } from 'node:fs';
import http2, { type Http2Server, type Http2SecureServer, type ServerHttp2Stream } from 'node:http2';
import type { Server as NetServer } from 'node:net';
import type { Logger } from 'pino';
import { DEFAULT_MAX_IN_FLIGHT, shareOf } from '../overload/admission.js';

/**
 * The bounds one listener keeps so that no client, whatever it opens and however slowly it writes,
 * holds file descriptors or memory for long: a cap on open connections, a deadline for the first
 * bytes of a connection and for every request's headers and body, an idle timeout for HTTP/2
 * sessions, and a stream limit per session. Timers are per connection or per stream and are
 * cleared when it closes.
 */
export type ServerLimits = {
  /** Open connections (every protocol, TLS or not) beyond which a new one is closed at once. */
  maxConnections: number;
  /** An HTTP/2 session with no open stream is closed after this (and one with no traffic at all after this plus the request timeout). */
  idleTimeoutMs: number;
  /** A request's headers and body must have arrived in full this long after it started (HTTP/1.1 and each HTTP/2 stream). */
  requestTimeoutMs: number;
  /** Streams one HTTP/2 session may have open at once, advertised in SETTINGS. */
  maxConcurrentStreams: number;
  /** Requests in flight on the agent surface (REST /api/*, PaymentPolicyService) beyond which new ones are refused at once. */
  maxInFlight: number;
  /**
   * The part of maxInFlight one organization may hold (default three quarters, overload/admission.ts
   * tenantShare), so one tenant's slow or flooding requests leave room for the others.
   */
  maxInFlightPerOrg: number;
};

/** Default stream limit: gRPC clients multiplex well below it; a flood of half-open streams stops here. */
export const MAX_CONCURRENT_STREAMS = 100;
/** Default idle timeout of an HTTP/2 session. */
export const IDLE_TIMEOUT_MS = 60_000;
/** Default time to receive a whole request. */
export const REQUEST_TIMEOUT_MS = 30_000;
/** File descriptors kept for everything but client connections: SQLite, workers, probes, logs. */
const RESERVED_FDS = 256;
/** At most one "connection limit reached" line per this interval. */
const DROP_WARN_INTERVAL_MS = 60_000;

/** 4096, or fewer when the process's open-file limit would run out first (limit − 256, at least 64). */
export function defaultMaxConnections(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
    const soft = Number(line?.split(/\s{2,}/)[1]);
    if (Number.isSafeInteger(soft) && soft > 0) return Math.max(64, Math.min(4096, soft - RESERVED_FDS));
  } catch {
    // Not Linux: no cheap way to read the limit; the fixed default applies.
  }
  return 4096;
}

/** The limits with every unset field at its default. */
export function resolveServerLimits(partial: Partial<ServerLimits> = {}): ServerLimits {
  return {
    maxConnections: partial.maxConnections ?? defaultMaxConnections(),
    idleTimeoutMs: partial.idleTimeoutMs ?? IDLE_TIMEOUT_MS,
    requestTimeoutMs: partial.requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
    maxConcurrentStreams: partial.maxConcurrentStreams ?? MAX_CONCURRENT_STREAMS,
    maxInFlight: partial.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
    maxInFlightPerOrg: shareOf(partial.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT, partial.maxInFlightPerOrg),
  };
}

/**
 * Time allowed for a connection's first bytes (the h2c-or-HTTP/1.1 peek, the TLS handshake) and for
 * a request's headers: 15 s, or the request timeout when that is shorter (Node requires headers ≤ request).
 */
export function headersTimeoutMs(limits: ServerLimits): number {
  return Math.min(15_000, limits.requestTimeoutMs);
}

/** HTTP/1.1 server options that enforce the limits (Node checks them on a timer, so the interval follows the shortest). */
export function http1Timeouts(limits: ServerLimits) {
  const headersTimeout = headersTimeoutMs(limits);
  return {
    requestTimeout: limits.requestTimeoutMs,
    headersTimeout,
    keepAliveTimeout: Math.min(5_000, limits.idleTimeoutMs),
    connectionsCheckingInterval: Math.max(10, Math.min(5_000, Math.floor(headersTimeout / 4))),
  };
}

/** HTTP/2 server options: the advertised stream limit. */
export function http2Settings(limits: ServerLimits): { settings: http2.Settings } {
  return { settings: { maxConcurrentStreams: limits.maxConcurrentStreams } };
}

/**
 * Closes HTTP/2 sessions that stay idle (no open stream) for `idleTimeoutMs` with a GOAWAY, drops
 * sessions with no traffic at all for that long, and resets (RST_STREAM CANCEL) a stream whose
 * request has not fully arrived within `requestTimeoutMs`.
 */
export function limitHttp2Sessions(server: Http2Server | Http2SecureServer, limits: ServerLimits): void {
  server.on('session', (session) => {
    let open = 0;
    let idle: NodeJS.Timeout | undefined;
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => session.close(), limits.idleTimeoutMs);
    };
    armIdle();
    session.on('stream', (stream: ServerHttp2Stream) => {
      open++;
      clearTimeout(idle);
      limitRequestRead(stream, limits.requestTimeoutMs);
      stream.once('close', () => {
        if (--open === 0 && !session.closed && !session.destroyed) armIdle();
      });
    });
    session.once('close', () => clearTimeout(idle));
    // Backstop for streams that never close (a peer that stops reading its responses): a silent
    // half-sent stream is reset at the request timeout and the session is idle after that, so a
    // session with no traffic at all for request + idle timeout has nothing left to wait for.
    session.setTimeout(limits.requestTimeoutMs + limits.idleTimeoutMs, () => session.destroy());
  });
}

/** Resets a stream whose request body is still arriving `ms` after its headers. */
function limitRequestRead(stream: ServerHttp2Stream, ms: number): void {
  if (stream.endAfterHeaders) return;
  const deadline = setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), ms);
  const done = () => clearTimeout(deadline);
  stream.once('end', done);
  stream.once('close', done);
}

/**
 * Caps open connections on the listening socket (Node closes the excess right after accepting it)
 * and logs one warn line when the cap is hit, then at most one a minute with how many were refused.
 */
export function capConnections(listener: NetServer, limits: ServerLimits, log: Logger): void {
  listener.maxConnections = limits.maxConnections;
  let lastWarning = Number.NEGATIVE_INFINITY;
  let refused = 0;
  listener.on('drop', () => {
    refused++;
    const now = Date.now();
    if (now - lastWarning < DROP_WARN_INTERVAL_MS) return;
    lastWarning = now;
    log.warn({ maxConnections: limits.maxConnections, refused }, 'connection limit reached: refusing new connections (raise --max-connections if this is real load)');
    refused = 0;
  });
}
