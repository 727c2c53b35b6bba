import { timestampFromMs, type Timestamp } from '@bufbuild/protobuf/wkt';
import { UsageError } from './errors.js';
import type { Flags } from './parseFlags.js';

/** An optional flag restricted to a fixed set of words. */
export function optionalChoice<T extends string>(flags: Flags, name: string, choices: readonly T[]): T | undefined {
  const value = flags.get(name);
  if (value === undefined) return undefined;
  if (!(choices as readonly string[]).includes(value)) throw new UsageError(`${name} must be one of ${choices.join(', ')}, got "${value}"`);
  return value as T;
}

/** A required flag restricted to a fixed set of words. */
export function requireChoice<T extends string>(flags: Flags, name: string, choices: readonly T[]): T {
  flags.require(name);
  return optionalChoice(flags, name, choices)!;
}

/** An optional non-negative integer flag no larger than `max` (proto uint32 fields cannot hold more). */
export function optionalInteger(flags: Flags, name: string, min: number, max: number): number | undefined {
  const value = flags.get(name);
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d{1,10}$/.test(value) || n < min || n > max) throw new UsageError(`${name} must be an integer from ${min} to ${max}, got "${value}"`);
  return n;
}

/**
 * An optional ISO 8601 time. A date alone means its midnight UTC; a date-time needs a zone so the
 * same command line means the same instant on every operator's machine.
 */
export function optionalTime(flags: Flags, name: string): Timestamp | undefined {
  const value = flags.get(name);
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  const shaped = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/.test(value);
  if (!shaped || Number.isNaN(ms)) throw new UsageError(`${name} must be an ISO 8601 date or date-time with zone, e.g. 2025-01-31 or 2025-01-31T12:00:00Z, got "${value}"`);
  return timestampFromMs(ms);
}
