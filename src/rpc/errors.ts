import { Code, ConnectError, type Interceptor } from '@connectrpc/connect';
import type { Logger } from 'pino';
import { OVERLOADED_RETRY_AFTER_SECONDS, toDomainError, type ErrorKind } from '../domain/errors.js';
import { requestLoggerKey } from './context.js';
import { errorInfo } from '../protoMapping/errors.js';
import { ErrorInfoSchema } from '../../gen/paypolicy/v1/error_pb.js';

/** DomainError kind → Connect code: the only place the RPC transport decides a code. */
export const CONNECT_CODES = {
  invalid_argument: Code.InvalidArgument,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  not_found: Code.NotFound,
  missing_agent: Code.InvalidArgument,
  conflict: Code.AlreadyExists,
  failed_precondition: Code.FailedPrecondition,
  treasury_unavailable: Code.Unavailable,
  payload_too_large: Code.ResourceExhausted,
  unimplemented: Code.Unimplemented,
  // Unavailable, not ResourceExhausted (a caller's quota): the condition is the server's and
  // passes; gRPC retry policies retry Unavailable.
  overloaded: Code.Unavailable,
  internal: Code.Internal,
} as const satisfies Record<ErrorKind, Code>;

/**
 * Converts whatever a handler throws into a ConnectError. Errors Connect raised itself (bad
 * encoding, deadline) pass through; anything unknown becomes `internal` with no detail, and its
 * cause is logged here, never sent.
 */
export function toConnectError(err: unknown, log: Logger | undefined): ConnectError {
  if (err instanceof ConnectError) return err;
  const e = toDomainError(err);
  if (e.kind === 'internal') log?.error({ err: e.cause ?? e }, 'unhandled error in rpc handler');
  // The code travels twice: as a paypolicy.v1.ErrorInfo detail (grpc-status-details-bin on gRPC,
  // `details` in Connect JSON) for typed clients, and as the x-error-code header for the rest.
  const ce = new ConnectError(e.shortMessage, CONNECT_CODES[e.kind], undefined, [{ desc: ErrorInfoSchema, value: errorInfo(e) }]);
  ce.metadata.set('x-error-code', e.code);
  if (e.kind === 'overloaded') ce.metadata.set('retry-after', String(OVERLOADED_RETRY_AFTER_SECONDS));
  return ce;
}

/** Server interceptor applying toConnectError to every RPC. */
export const domainErrorInterceptor: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (err) {
    throw toConnectError(err, req.contextValues.get(requestLoggerKey)?.());
  }
};
