import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { DomainError, invalidArgument } from '../domain/errors.js';

/** REST request bodies larger than this are refused with 413 before they are buffered. */
export const MAX_REST_BODY_BYTES = 64 * 1024;

type NodeRequest = IncomingMessage | Http2ServerRequest;

function tooLarge(): DomainError {
  return new DomainError('payload_too_large', `Request body exceeds ${MAX_REST_BODY_BYTES} bytes`, { code: 'body_too_large' });
}

const abandoned = new WeakSet<object>();

/**
 * True when readBody stopped reading a body half-way: the rest may still be arriving, so an
 * HTTP/1.x connection cannot carry another request and must be closed after the answer.
 */
export function bodyAbandoned(req: NodeRequest): boolean {
  return abandoned.has(req);
}

/** Reads the body up to the limit; stops reading (and answers 413) as soon as it is exceeded. */
export async function readBody(req: NodeRequest): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_REST_BODY_BYTES) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_REST_BODY_BYTES) {
      abandoned.add(req);
      throw tooLarge();
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
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
