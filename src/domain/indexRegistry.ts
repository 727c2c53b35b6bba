import type { AttributedService } from './types.js';

/**
 * A registry as attribution reads it. A resource URL can only lie under a base URL of its own
 * origin whose path is the resource's path or one of its prefixes ending at a segment boundary,
 * so attribution asks for the services with such a base URL, and for the services an allowlist
 * names by slug; nothing else of the registry is looked at, and what one attribution costs does
 * not grow with the registry, not even with base URLs on the resource's own origin.
 */
export type RegistryIndex<S extends AttributedService = AttributedService> = {
  /**
   * The services, in registry order, with a base URL whose origin is the URL's and whose path is
   * one the URL's path could lie under (attribution.ts underPath): a superset of those that cover it.
   */
  candidates(url: URL): readonly S[];
  /** The first service in registry order with this slug. */
  bySlug(slug: string): S | undefined;
};

const NONE: readonly never[] = [];
const NO_POSITIONS: readonly number[] = [];

/**
 * The base paths a path can lie under: itself, and each prefix that ends at a `/` both with and
 * without that slash (`/a/b` lies under `/a/b`, `/a/`, `/a`, `/` and the empty path).
 */
function basePathsOf(path: string): string[] {
  const out = [path];
  for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) {
    const withSlash = path.slice(0, i + 1);
    if (withSlash !== path) out.push(withSlash);
    out.push(path.slice(0, i));
  }
  return out;
}

/** Indexes a registry list by the origin and path of its base URLs and by slug, keeping its order. */
export function indexRegistry<S extends AttributedService>(services: readonly S[]): RegistryIndex<S> {
  const bases = new Map<string, number[]>();
  const slugs = new Map<string, S>();
  services.forEach((service, position) => {
    if (!slugs.has(service.slug)) slugs.set(service.slug, service);
    for (const method of service.paymentMethods) {
      const key = keyOf(method.baseUrl);
      if (key === null) continue;
      const list = bases.get(key);
      if (!list) bases.set(key, [position]);
      else if (list[list.length - 1] !== position) list.push(position);
    }
  });
  return {
    candidates(url) {
      const found = new Set<number>();
      for (const path of basePathsOf(url.pathname)) {
        for (const position of bases.get(`${url.origin} ${path}`) ?? NO_POSITIONS) found.add(position);
      }
      if (found.size === 0) return NONE;
      return [...found].sort((a, b) => a - b).map((position) => services[position]!);
    },
    bySlug: (slug) => slugs.get(slug),
  };
}

/**
 * Two indexes read as one registry: `first`'s services before `second`'s (the shared records
 * before an organization's own, as an organization sees them).
 */
export function joinRegistryIndexes<S extends AttributedService>(first: RegistryIndex<S>, second: RegistryIndex<S>): RegistryIndex<S> {
  return {
    candidates(url) {
      const a = first.candidates(url);
      const b = second.candidates(url);
      return b.length === 0 ? a : a.length === 0 ? b : [...a, ...b];
    },
    bySlug: (slug) => first.bySlug(slug) ?? second.bySlug(slug),
  };
}

function keyOf(baseUrl: string): string | null {
  if (baseUrl === '') return null;
  try {
    const url = new URL(baseUrl);
    return `${url.origin} ${url.pathname}`;
  } catch {
    return null;
  }
}
