import type { PingResult } from '../app/ping.js';
import type { ResolveResult } from '../app/registry.js';
import type { ServiceRecord } from '../domain/types.js';

/**
 * Domain results → the wire protocol's JSON. Field names, nulls and key order are the contract
 * REST clients depend on, so each body is written out explicitly rather than derived from proto.
 */

export function pingJson(r: PingResult) {
  return { ok: r.ok, agent_id: r.agentId, agent_name: r.agentName, org_id: r.orgId, status: r.status };
}

export function serviceJson(s: ServiceRecord) {
  return {
    id: s.id,
    slug: s.slug,
    name: s.name,
    description: s.description,
    category: s.category,
    logoUrl: s.logoUrl,
    docsUrl: s.docsUrl,
    paymentMethods: s.paymentMethods.map((m) => ({ realm: m.realm, baseUrl: m.baseUrl, protocol: m.protocol })),
    endpoints: s.endpoints.map((e) => ({
      method: e.method,
      path: e.path,
      description: e.description,
      priceAtomic: e.priceAtomic,
      currency: e.currency,
      pricingModel: e.pricingModel,
      protocol: e.protocol,
    })),
  };
}

export function resolveJson(r: ResolveResult) {
  // fromEntries defines own properties, so a slug such as "__proto__" stays plain data.
  const results = Object.fromEntries(r.results.map((x) => [x.slug, x.service ? serviceJson(x.service) : null]));
  return { results, resolvedCount: r.resolvedCount, unresolvedCount: r.unresolvedCount };
}
