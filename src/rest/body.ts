import { DomainError, invalidArgument } from '../domain/errors.js';
import { BodyTooLargeError, readBody, RequestClosedError, type NodeRequest } from '../http/io.js';

/** REST request bodies larger than this are refused with 413 before they are buffered. */
export const MAX_REST_BODY_BYTES = 64 * 1024;

/** Reads a REST body up to the limit; beyond it, 413 `body_too_large` (its connection closed after the answer: http/io.ts send). */
export async function readRestBody(req: NodeRequest): Promise<Buffer> {
  try {
    return await readBody(req, MAX_REST_BODY_BYTES);
  } catch (err) {
    if (err instanceof BodyTooLargeError) throw new DomainError('payload_too_large', `Request body exceeds ${MAX_REST_BODY_BYTES} bytes`, { code: 'body_too_large' });
    // The client's doing, not a server failure: a 400 (that nobody may read), not a 500 and an error line.
    if (err instanceof RequestClosedError) throw invalidArgument('Request closed before its body was complete', 'invalid_request');
    throw err;
  }
}

/** Parses a JSON object body; anything else (empty, invalid JSON, array, scalar) is a 400. */
export function parseJsonObject(raw: Buffer): Record<string, unknown> {
  if (raw.length === 0) throw invalidArgument('Request body must be a JSON object', 'invalid_json');
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch {
    throw invalidArgument('Request body is not valid JSON', 'invalid_json');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidArgument('Request body must be a JSON object', 'invalid_json');
  }
  return value as Record<string, unknown>;
}

/** Reads an optional string field; a present non-string value is a 400 naming the field. */
export function optionalString(body: Record<string, unknown>, field: string): string | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalidArgument(`${field} must be a string`);
  return v;
}
