import type { ServiceRecord } from '../../src/domain/types.js';

let seq = 0;

/** A registry record named by its slug, with one x402 payment method per base URL and a fresh id. */
export function serviceRecord(slug: string, baseUrls: readonly string[]): ServiceRecord {
  return {
    id: `00000000-0000-4000-8000-${String(++seq).padStart(12, '0')}`, slug, name: slug, description: '', category: '', logoUrl: '', docsUrl: '',
    paymentMethods: baseUrls.map((baseUrl) => ({ realm: '', baseUrl, protocol: 'x402' })), endpoints: [],
  };
}
