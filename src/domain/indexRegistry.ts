import type { ServiceRecord } from './types.js';

/**
 * A registry as attribution reads it. A resource URL can only lie under a base URL of its own
 * origin, so attribution asks for the services with a base URL on that origin, and for the
 * services an allowlist names by slug; nothing else of the registry is looked at, and what one
 * attribution costs does not grow with the registry.
 */
export type RegistryIndex = {
  /** The services with at least one base URL of this origin (as `URL.origin` spells it), in registry order. */
  atOrigin(origin: string): readonly ServiceRecord[];
  /** The first service in registry order with this slug. */
  bySlug(slug: string): ServiceRecord | undefined;
};

const NONE: readonly ServiceRecord[] = [];

/** Indexes a registry list by the origins of its base URLs and by slug, keeping its order. */
export function indexRegistry(services: readonly ServiceRecord[]): RegistryIndex {
  const origins = new Map<string, ServiceRecord[]>();
  const slugs = new Map<string, ServiceRecord>();
  for (const service of services) {
    if (!slugs.has(service.slug)) slugs.set(service.slug, service);
    const seen = new Set<string>();
    for (const method of service.paymentMethods) {
      const origin = originOf(method.baseUrl);
      if (origin === null || seen.has(origin)) continue;
      seen.add(origin);
      const list = origins.get(origin);
      if (list) list.push(service);
      else origins.set(origin, [service]);
    }
  }
  return { atOrigin: (origin) => origins.get(origin) ?? NONE, bySlug: (slug) => slugs.get(slug) };
}

/**
 * Two indexes read as one registry: `first`'s services before `second`'s (the shared records
 * before an organization's own, as an organization sees them).
 */
export function joinRegistryIndexes(first: RegistryIndex, second: RegistryIndex): RegistryIndex {
  return {
    atOrigin(origin) {
      const a = first.atOrigin(origin);
      const b = second.atOrigin(origin);
      return b.length === 0 ? a : a.length === 0 ? b : [...a, ...b];
    },
    bySlug: (slug) => first.bySlug(slug) ?? second.bySlug(slug),
  };
}

function originOf(baseUrl: string): string | null {
  if (baseUrl === '') return null;
  try {
    return new URL(baseUrl).origin;
  } catch {
    return null;
  }
}
