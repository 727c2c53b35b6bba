import { randomBytes, randomUUID } from 'node:crypto';

/** New prefixed identifier with 96 random bits, e.g. `agt_5f0c…`. */
export function newId(prefix: 'org' | 'agt' | 'key'): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}

/** New UUID v4 for transactions, approvals and registry records. */
export function newUuid(): string {
  return randomUUID();
}
