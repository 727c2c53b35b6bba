import { readFileSync } from 'node:fs';
import { JsonDuplicateKeyError, numberText, parseJson } from '../http/parseJson.js';
import { UsageError } from './errors.js';

/**
 * A JSON file named by a flag; unreadable, malformed or with a key twice, it is the user's usage
 * error. `wholeNumbers`: every number in it must be written as a whole number (a policy document's
 * only numbers are counts), as Connect JSON reads the same field: `5.0` or `1e0` is refused, not
 * read as 5 or 1.
 */
export function readJsonFile(path: string, options: { wholeNumbers?: boolean } = {}): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'unknown error'}`);
  }
  let value: unknown;
  try {
    value = parseJson(text);
  } catch (err) {
    if (err instanceof JsonDuplicateKeyError) throw new UsageError(`${path} has a duplicate key "${err.key}"`);
    throw new UsageError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
  if (options.wholeNumbers) requireWholeNumbers(value, path, '');
  return value;
}

function requireWholeNumbers(value: unknown, path: string, at: string): void {
  if (value === null || typeof value !== 'object') return;
  for (const [key, item] of Object.entries(value)) {
    const place = Array.isArray(value) ? `${at}[${key}]` : at === '' ? key : `${at}.${key}`;
    const text = numberText(value, key);
    if (text !== undefined && !/^-?(0|[1-9]\d*)$/.test(text)) throw new UsageError(`${path}: ${place} must be a whole number written without a fraction or an exponent, got ${text}`);
    requireWholeNumbers(item, path, place);
  }
}
