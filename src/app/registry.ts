import { DomainError, invalidArgument } from '../domain/errors.js';
import type { ServiceEndpoint, ServiceRecord, PaymentMethod } from '../domain/types.js';
import { SLUG, optionalText, requireName } from '../domain/validate.js';
import { writeTxn } from '../store/db.js';
import { newUuid } from '../store/ids.js';
import type { AppDeps } from './deps.js';

const MAX_RESOLVE_SLUGS = 100;
const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

function optionalUrl(value: string, field: string): string {
  const v = value.trim();
  if (v === '') return '';
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw invalidArgument(`${field} must be an absolute http(s) URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalidArgument(`${field} must be an absolute http(s) URL`);
  if (url.username || url.password) throw invalidArgument(`${field} must not carry credentials`);
  return v;
}

/** Checks a registry record from an operator; the slug is its identity. */
export function normalizeService(input: ServiceRecord): ServiceRecord {
  const slug = input.slug.trim();
  if (!SLUG.test(slug)) throw invalidArgument('slug must be 1 to 64 lowercase letters, digits and dashes');
  // Allowlists tell addresses from slugs by the 0x prefix, so no slug may carry it.
  if (slug.startsWith('0x')) throw invalidArgument('slug must not start with 0x');
  if (input.paymentMethods.length > 20) throw invalidArgument('payment_methods must have at most 20 entries');
  if (input.endpoints.length > 500) throw invalidArgument('endpoints must have at most 500 entries');
  const paymentMethods: PaymentMethod[] = input.paymentMethods.map((m, i) => ({
    realm: optionalText(m.realm.trim(), `payment_methods[${i}].realm`, 255),
    baseUrl: optionalUrl(m.baseUrl, `payment_methods[${i}].base_url`),
    protocol: requireName(m.protocol, `payment_methods[${i}].protocol`, 32),
  }));
  const endpoints: ServiceEndpoint[] = input.endpoints.map((e, i) => {
    const method = e.method.trim().toUpperCase();
    if (!HTTP_METHODS.includes(method)) throw invalidArgument(`endpoints[${i}].method must be an HTTP method`);
    if (e.priceAtomic !== null && !/^\d{1,78}$/.test(e.priceAtomic)) {
      throw invalidArgument(`endpoints[${i}].price_atomic must be a non-negative integer string or unset`);
    }
    return {
      method,
      path: optionalText(e.path.trim(), `endpoints[${i}].path`, 1000),
      description: optionalText(e.description, `endpoints[${i}].description`, 2000),
      priceAtomic: e.priceAtomic,
      currency: optionalText(e.currency.trim(), `endpoints[${i}].currency`, 32),
      pricingModel: optionalText(e.pricingModel.trim(), `endpoints[${i}].pricing_model`, 32),
      protocol: optionalText(e.protocol.trim(), `endpoints[${i}].protocol`, 32),
    };
  });
  return {
    id: input.id,
    slug,
    name: requireName(input.name, 'name'),
    description: optionalText(input.description, 'description', 2000),
    category: optionalText(input.category.trim(), 'category', 64),
    logoUrl: optionalUrl(input.logoUrl, 'logo_url'),
    docsUrl: optionalUrl(input.docsUrl, 'docs_url'),
    paymentMethods,
    endpoints,
  };
}

export function upsertService(deps: AppDeps, input: ServiceRecord): ServiceRecord {
  const record = normalizeService(input);
  return writeTxn(deps.store.db, () => deps.store.services.upsert({ ...record, id: newUuid() }, deps.now()));
}

export function deleteService(deps: AppDeps, slug: string): void {
  writeTxn(deps.store.db, () => {
    if (!deps.store.services.delete(slug.trim())) throw new DomainError('not_found', 'Service not found', { code: 'service_not_found' });
  });
}

export function listServices(deps: AppDeps): readonly ServiceRecord[] {
  return deps.store.services.list();
}

export type ResolveResult = {
  results: Array<{ slug: string; service: ServiceRecord | null }>;
  resolvedCount: number;
  unresolvedCount: number;
};

/**
 * Looks up slugs. Each input may itself be a comma-separated list; blanks are dropped, duplicates
 * collapse to one entry, and a slug that is not registered (or not even slug-shaped) maps to null.
 */
export function resolveServices(deps: AppDeps, inputs: string[]): ResolveResult {
  const slugs: string[] = [];
  for (const input of inputs) {
    for (const part of input.split(',')) {
      const slug = part.trim();
      if (slug !== '' && !slugs.includes(slug)) slugs.push(slug);
    }
  }
  if (slugs.length === 0) throw invalidArgument('slug or slugs query parameter is required', 'slug_required');
  if (slugs.length > MAX_RESOLVE_SLUGS) throw invalidArgument(`at most ${MAX_RESOLVE_SLUGS} slugs per request`, 'too_many_slugs');
  const results = slugs.map((slug) => ({ slug, service: (SLUG.test(slug) && deps.store.services.get(slug)) || null }));
  const resolvedCount = results.filter((r) => r.service !== null).length;
  return { results, resolvedCount, unresolvedCount: results.length - resolvedCount };
}
