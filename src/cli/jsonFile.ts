import { readFileSync } from 'node:fs';
import { JsonDuplicateKeyError, parseJson } from '../http/parseJson.js';
import { UsageError } from './errors.js';

/** A JSON file named by a flag; unreadable, malformed or with a key twice, it is the user's usage error. */
export function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'unknown error'}`);
  }
  try {
    return parseJson(text);
  } catch (err) {
    if (err instanceof JsonDuplicateKeyError) throw new UsageError(`${path} has a duplicate key "${err.key}"`);
    throw new UsageError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
}
