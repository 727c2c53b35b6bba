import { invalidArgument } from './errors.js';
import type { ServiceRecord } from './types.js';

/**
 * Registry records in the wire protocol's JSON shape (what /api/resolve returns: camelCase keys,
 * `priceAtomic` a decimal string or null) → domain records. Only the shape is checked here; every
 * rule about the values is normalizeService's, applied by upsertService.
 */

const RECORD_KEYS = ['id', 'slug', 'name', 'description', 'category', 'logoUrl', 'docsUrl', 'paymentMethods', 'endpoints'];
const METHOD_KEYS = ['realm', 'baseUrl', 'protocol'];
const ENDPOINT_KEYS = ['method', 'path', 'description', 'priceAtomic', 'currency', 'pricingModel', 'protocol'];

function reader(value: unknown, where: string, keys: readonly string[]) {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidArgument(`${where} must be a JSON object`);
  const o = value as Record<string, unknown>;
  // A snake_case or misspelt key would otherwise be dropped silently and store an empty field.
  const unknown = Object.keys(o).find((k) => !keys.includes(k));
  if (unknown !== undefined) throw invalidArgument(`${where} has unknown field "${unknown.slice(0, 40)}"; expected ${keys.join(', ')}`);
  return {
    o,
    text(key: string): string {
      const v = o[key];
      if (v === undefined || v === null) return '';
      if (typeof v !== 'string') throw invalidArgument(`${where}.${key} must be a string`);
      return v;
    },
    list(key: string): unknown[] {
      const v = o[key];
      if (v === undefined || v === null) return [];
      if (!Array.isArray(v)) throw invalidArgument(`${where}.${key} must be an array`);
      return v;
    },
  };
}

/** One endpoint object in the wire shape. */
export function endpointFromWireJson(value: unknown, where: string): ServiceRecord['endpoints'][number] {
  const e = reader(value, where, ENDPOINT_KEYS);
  const price = e.o.priceAtomic;
  if (price !== undefined && price !== null && typeof price !== 'string') throw invalidArgument(`${where}.priceAtomic must be a decimal string or null`);
  return {
    method: e.text('method'), path: e.text('path'), description: e.text('description'), priceAtomic: price ?? null,
    currency: e.text('currency'), pricingModel: e.text('pricingModel'), protocol: e.text('protocol'),
  };
}

/** One record in the wire shape; `where` names it in messages (e.g. `record 3`). */
export function serviceFromWireJson(value: unknown, where: string): ServiceRecord {
  const r = reader(value, where, RECORD_KEYS);
  return {
    id: '',
    slug: r.text('slug'),
    name: r.text('name'),
    description: r.text('description'),
    category: r.text('category'),
    logoUrl: r.text('logoUrl'),
    docsUrl: r.text('docsUrl'),
    paymentMethods: r.list('paymentMethods').map((m, i) => {
      const pm = reader(m, `${where}.paymentMethods[${i}]`, METHOD_KEYS);
      return { realm: pm.text('realm'), baseUrl: pm.text('baseUrl'), protocol: pm.text('protocol') };
    }),
    endpoints: r.list('endpoints').map((e, i) => endpointFromWireJson(e, `${where}.endpoints[${i}]`)),
  };
}

/** Endpoints back to the wire shape, for editing them as JSON. */
export function endpointsToWireJson(endpoints: ServiceRecord['endpoints']): string {
  if (endpoints.length === 0) return '';
  return JSON.stringify(endpoints.map((e) => ({
    method: e.method, path: e.path, description: e.description, priceAtomic: e.priceAtomic, currency: e.currency,
    pricingModel: e.pricingModel, protocol: e.protocol,
  })), null, 2);
}
