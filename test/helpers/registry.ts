import type { ServiceRecord } from '../../src/domain/types.js';
import { recordBytes } from '../../src/domain/recordBytes.js';

let seq = 0;

/** A registry record named by its slug, with one x402 payment method per base URL and a fresh id. */
export function serviceRecord(slug: string, baseUrls: readonly string[]): ServiceRecord {
  return {
    id: `00000000-0000-4000-8000-${String(++seq).padStart(12, '0')}`, slug, name: slug, description: '', category: '', logoUrl: '', docsUrl: '',
    paymentMethods: baseUrls.map((baseUrl) => ({ realm: '', baseUrl, protocol: 'x402' })), endpoints: [],
  };
}

/**
 * A registry record of exactly `bytes` stored bytes (src/domain/recordBytes.ts), made of endpoints
 * with 1,000-character descriptions and the record's description for the rest: the shape of a
 * record at (or near) the per-record bound, within every per-field bound.
 */
export function sizedRecord(slug: string, bytes: number, baseUrls: readonly string[] = []): ServiceRecord {
  const record = serviceRecord(slug, baseUrls);
  const endpoint = (i: number) => ({
    method: 'GET', path: `/v1/${slug}/${i}`, description: 'd'.repeat(1000), priceAtomic: '1000', currency: 'USDC', pricingModel: 'fixed', protocol: 'x402',
  });
  while (recordBytes({ ...record, endpoints: [...record.endpoints, endpoint(record.endpoints.length)] }) <= bytes) record.endpoints.push(endpoint(record.endpoints.length));
  const rest = bytes - recordBytes(record);
  if (rest < 0 || rest > 2000) throw new Error(`cannot make a record of ${bytes} bytes`);
  return { ...record, description: 'r'.repeat(rest) };
}
