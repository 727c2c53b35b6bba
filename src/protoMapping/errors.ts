import type { MessageInitShape } from '@bufbuild/protobuf';
import { OVERLOADED_RETRY_AFTER_SECONDS, type DomainError } from '../domain/errors.js';
import type { ErrorInfoSchema } from '../../gen/paypolicy/v1/error_pb.js';

/** ErrorInfo.domain of every paypolicy error. */
export const ERROR_DOMAIN = 'paypolicy.dev';

/**
 * The machine-readable detail of an error: its code (REST's `code`, the `x-error-code` header) and
 * only facts a caller may act on. `meta` and `cause` are for logs and never appear here.
 */
export function errorInfo(e: DomainError): MessageInitShape<typeof ErrorInfoSchema> {
  const metadata: Record<string, string> = e.kind === 'overloaded' ? { retry_after_seconds: String(OVERLOADED_RETRY_AFTER_SECONDS) } : {};
  return { reason: e.code, domain: ERROR_DOMAIN, metadata };
}
