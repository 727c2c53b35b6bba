import type { DescField, DescMessage } from '@bufbuild/protobuf';
import { isIntegerField } from '../protoMapping/signPayload.js';
import { DomainError, invalidArgument } from '../domain/errors.js';
import { JsonDuplicateKeyError, numberText, parseJson } from '../http/parseJson.js';
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

/**
 * Parses a JSON object body; anything else (empty, invalid JSON, array, scalar) is a 400, and so is
 * a key repeated anywhere in it or, when `fields` is given, a top-level key it does not list: a
 * request the server would read differently from what the client meant is refused, not guessed at.
 * Numbers keep their source text (http/parseJson.ts numberText).
 */
export function parseJsonObject(raw: Buffer, fields?: readonly string[]): Record<string, unknown> {
  if (raw.length === 0) throw invalidArgument('Request body must be a JSON object', 'invalid_json');
  let value: unknown;
  try {
    value = parseJson(raw.toString('utf8'));
  } catch (e) {
    if (e instanceof JsonDuplicateKeyError) throw invalidArgument(`Request body has a duplicate key "${e.key}"`, 'invalid_json');
    throw invalidArgument('Request body is not valid JSON', 'invalid_json');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidArgument('Request body must be a JSON object', 'invalid_json');
  }
  if (fields) {
    for (const key of Object.keys(value)) {
      if (!fields.includes(key)) throw invalidArgument(`Unknown field "${cut(key)}" (this endpoint takes ${fields.join(', ')})`);
    }
  }
  return value as Record<string, unknown>;
}

/** Client text echoed in an error, cut so that an error never carries a huge value back. */
function cut(text: string, max = 100): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/**
 * Holds a JSON object (from parseJsonObject) whose keys are the proto names of `desc`'s fields to
 * that message: with `closed`, a key the message does not declare is refused, named `prefix+key`;
 * and an integer field's number must be written as an integer (digits, an optional minus).
 * JSON.parse reads 8453.00000000000001, 84530e-1 and 3e1 as the integers 8453 and 30, so without
 * the source text such a value would be taken for one the client did not write.
 */
export function holdToMessage(obj: Record<string, unknown>, desc: DescMessage, prefix: string, closed: { what: string } | undefined): void {
  for (const key of Object.keys(obj)) {
    const field = desc.fields.find((f) => f.name === key);
    if (!field) {
      if (closed) throw invalidArgument(`Unknown field "${prefix}${cut(key)}" (${closed.what} takes ${desc.fields.map((f) => f.name).join(', ')})`);
      continue;
    }
    requireIntegerText(obj, key, field, prefix);
  }
}

/**
 * Refuses an integer field's JSON number that is not written as an integer (digits, an optional
 * minus): JSON.parse reads 84530e-1 as 8453. A value with a fraction is left to the use case,
 * which refuses it with the field's range.
 */
export function requireIntegerText(obj: Record<string, unknown>, key: string, field: DescField, prefix: string): void {
  if (!isIntegerField(field) || !Number.isInteger(obj[key])) return;
  const text = numberText(obj, key)!;
  if (!/^-?\d+$/.test(text)) throw invalidArgument(`${prefix}${key} must be an integer written in digits, without a fraction or an exponent (not ${cut(text, 40)})`);
}

/**
 * A USD amount field as the text the client wrote: a JSON number's own source text (so that
 * 1.00000000000000001 is refused for its digits, as the same string is, instead of being rounded
 * to 1 by the double), anything else as it is.
 */
export function usdField(obj: Record<string, unknown>, field: string): unknown {
  const v = obj[field];
  return typeof v === 'number' ? numberText(obj, field) : v;
}

/** A string field of a body: undefined when absent; any other JSON type, null included, is 400 `<field> must be a string`. */
export function stringField(body: Record<string, unknown>, field: string): string | undefined {
  const v = body[field];
  if (v !== undefined && typeof v !== 'string') throw invalidArgument(`${field} must be a string`);
  return v;
}
