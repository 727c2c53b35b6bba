import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ServiceRecordSchema } from '../../gen/paypolicy/v1/registry_pb.js';
import { UsageError } from './errors.js';

/** A registry record ready for UpsertService. */
export type ServiceRecordInit = MessageInitShape<typeof ServiceRecordSchema>;

type JsonObject = Record<string, unknown>;

const RECORD_KEYS = ['id', 'slug', 'name', 'description', 'category', 'logoUrl', 'docsUrl', 'paymentMethods', 'endpoints'];
const METHOD_KEYS = ['realm', 'baseUrl', 'protocol'];
const ENDPOINT_KEYS = ['method', 'path', 'description', 'priceAtomic', 'currency', 'pricingModel', 'protocol'];

/**
 * Reads fields of one JSON object. Unknown keys are rejected: the wire shape is camelCase, and a
 * snake_case or misspelt key would otherwise be dropped silently and store an empty field.
 */
function objectReader(value: unknown, where: string, keys: readonly string[]) {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UsageError(`${where} must be a JSON object`);
  const o = value as JsonObject;
  const unknown = Object.keys(o).find((k) => !keys.includes(k));
  if (unknown !== undefined) throw new UsageError(`${where} has unknown field "${unknown.slice(0, 40)}"; expected ${keys.join(', ')}`);
  const text = (key: string, required = false): string => {
    const v = o[key];
    if (v === undefined || v === null) {
      if (required) throw new UsageError(`${where}.${key} is required`);
      return '';
    }
    if (typeof v !== 'string') throw new UsageError(`${where}.${key} must be a string`);
    return v;
  };
  const list = (key: string): unknown[] => {
    const v = o[key];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) throw new UsageError(`${where}.${key} must be an array`);
    return v;
  };
  return { o, text, list };
}

/**
 * Maps a registry record in the wire protocol's JSON shape (the shape /api/resolve returns:
 * camelCase keys, `priceAtomic` a decimal string or null for dynamic pricing) to the proto
 * message. `where` names the source in error messages.
 */
export function serviceRecordFromJson(value: unknown, where: string): ServiceRecordInit {
  const r = objectReader(value, where, RECORD_KEYS);
  return {
    id: r.text('id'),
    slug: r.text('slug', true),
    name: r.text('name', true),
    description: r.text('description'),
    category: r.text('category'),
    logoUrl: r.text('logoUrl'),
    docsUrl: r.text('docsUrl'),
    paymentMethods: r.list('paymentMethods').map((m, i) => {
      const pm = objectReader(m, `${where}.paymentMethods[${i}]`, METHOD_KEYS);
      return { realm: pm.text('realm'), baseUrl: pm.text('baseUrl'), protocol: pm.text('protocol') };
    }),
    endpoints: r.list('endpoints').map((e, i) => {
      const ep = objectReader(e, `${where}.endpoints[${i}]`, ENDPOINT_KEYS);
      // null and absent both mean dynamic pricing, which proto expresses as an unset optional.
      const price = ep.o.priceAtomic;
      if (price !== undefined && price !== null && typeof price !== 'string') {
        throw new UsageError(`${where}.endpoints[${i}].priceAtomic must be a decimal string or null`);
      }
      return {
        method: ep.text('method'), path: ep.text('path'), description: ep.text('description'),
        priceAtomic: price ?? undefined, currency: ep.text('currency'), pricingModel: ep.text('pricingModel'), protocol: ep.text('protocol'),
      };
    }),
  };
}
