import type { Logger } from 'pino';
import { OVERLOADED_RETRY_AFTER_SECONDS, toDomainError, type ErrorKind } from '../domain/errors.js';

/** DomainError kind → HTTP status: the only place the REST transport decides a status. */
export const HTTP_STATUSES = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  missing_agent: 400,
  conflict: 409,
  failed_precondition: 409,
  treasury_unavailable: 503,
  payload_too_large: 413,
  unimplemented: 501,
  overloaded: 503,
  internal: 500,
} as const satisfies Record<ErrorKind, number>;

/** Body of every answer after a failed sync (fail-stop, see store/db.ts): 503 until the process exits. */
export const STORAGE_FAILED = { error: 'Storage failed; the service is stopping', code: 'storage_failed' } as const;

export type RestResponse = { status: number; body: unknown; headers?: Record<string, string> };

/**
 * Error body of every non-policy REST error: `{"error": <text>, "code": <machine code>}`.
 * Unknown errors answer 500 with no detail; the cause goes to the request log only. `overloaded`
 * (503) also carries `Retry-After`.
 */
export function errorResponse(err: unknown, log: Logger | undefined): RestResponse {
  const e = toDomainError(err);
  if (e.kind === 'internal') log?.error({ err: e.cause ?? e }, 'unhandled error in rest handler');
  const headers = e.kind === 'overloaded' ? { 'retry-after': String(OVERLOADED_RETRY_AFTER_SECONDS) } : undefined;
  return { status: HTTP_STATUSES[e.kind], body: { error: e.shortMessage, code: e.code }, headers };
}
