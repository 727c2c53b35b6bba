import { invalidArgument } from './errors.js';

/** Shapes of identifiers and names, checked before any lookup so garbage never reaches SQL. */
export const AGENT_ID = /^agt_[0-9a-z]{8,64}$/;
export const ORG_ID = /^org_[0-9a-z]{8,64}$/;
export const KEY_ID = /^key_[0-9a-z]{8,64}$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
export const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;

export const AGENT_STATUSES = ['active', 'paused', 'revoked'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];

/** Checks a display name: 1 to `max` characters after trimming, no control characters. */
export function requireName(value: string, field: string, max = 200): string {
  const name = value.trim();
  // eslint-disable-next-line no-control-regex
  if (name.length === 0 || name.length > max || /[\u0000-\u001f\u007f]/.test(name)) {
    throw invalidArgument(`${field} must be 1 to ${max} printable characters`);
  }
  return name;
}

/** Checks an identifier against its pattern, naming the field on failure. */
export function requireId(value: string, pattern: RegExp, field: string): string {
  if (!pattern.test(value)) throw invalidArgument(`${field} is missing or malformed`);
  return value;
}

/**
 * Optional free text of at most `max` characters. Line breaks and tabs are fine; a NUL is not:
 * PostgreSQL's TEXT cannot hold one (SQLSTATE 22021, a 500 there), and a SQLite deployment that
 * stored one could never be moved to PostgreSQL with migrate-store.
 */
export function optionalText(value: string, field: string, max: number): string {
  if (value.length > max) throw invalidArgument(`${field} must be at most ${max} characters`);
  if (value.includes('\u0000')) throw invalidArgument(`${field} must not contain a NUL character`);
  return value;
}

export function isAgentStatus(value: string): value is AgentStatus {
  return (AGENT_STATUSES as readonly string[]).includes(value);
}
