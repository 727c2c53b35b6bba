import type { ServiceRecord } from './types.js';

/**
 * The size a registry record takes in storage: the UTF-8 bytes of its slug, name, description,
 * category and URLs, and of the JSON of its payment methods and endpoints as the stores write them.
 * The stores sum the same columns with octet_length (store/services.ts recordBytesSql), which
 * reads only each value's length, so an organization's total costs no parsing to check.
 */
export function recordBytes(r: Omit<ServiceRecord, 'id'>): number {
  const text = (s: string) => Buffer.byteLength(s, 'utf8');
  return text(r.slug) + text(r.name) + text(r.description) + text(r.category) + text(r.logoUrl) + text(r.docsUrl)
    + text(JSON.stringify(r.paymentMethods)) + text(JSON.stringify(r.endpoints));
}
