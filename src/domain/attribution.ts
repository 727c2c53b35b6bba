import type { ServiceRecord } from './types.js';

/**
 * Registry as trust boundary: a runtime resource URL is attributed to a registered service only
 * when it lies under one of the service's registered base URLs (same origin, path prefix on a
 * segment boundary). The realm an MPP challenge claims is never enough on its own, because any
 * server can claim any realm; when the service registers a realm for the rail, the challenge's
 * realm must match it as well.
 */
export type Attribution =
  | { attributed: true; slug: string; name: string; note: string | null }
  | { attributed: false; note: string | null };

function underBase(resource: URL, base: URL): boolean {
  if (resource.origin !== base.origin) return false;
  const basePath = base.pathname.endsWith('/') ? base.pathname : `${base.pathname}/`;
  return resource.pathname === base.pathname || resource.pathname.startsWith(basePath);
}

function parse(url: string): URL | null {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/**
 * Finds the service a paid resource belongs to. `allowlistSlugs` only shapes the note that
 * explains why an allowlisted service did not cover this payment.
 */
export function attributeResource(
  services: readonly ServiceRecord[],
  resourceUrl: string,
  rail: 'x402' | 'mpp',
  realm: string | null,
  allowlistSlugs: readonly string[],
): Attribution {
  const resource = parse(resourceUrl);
  if (!resource) return { attributed: false, note: null };
  const realmMismatches: string[] = [];
  for (const service of services) {
    for (const method of service.paymentMethods) {
      if (method.protocol !== '' && method.protocol !== rail) continue;
      const base = method.baseUrl === '' ? null : parse(method.baseUrl);
      if (!base || !underBase(resource, base)) continue;
      if (rail === 'mpp' && method.realm !== '' && method.realm !== realm) {
        realmMismatches.push(`realm "${realm ?? ''}" does not match the registered realm "${method.realm}" of service ${service.slug}`);
        continue;
      }
      // Attributed, but possibly to a service the agent does not allow: say which ones it does.
      const others = allowlistSlugs.filter((slug) => slug !== service.slug);
      const note = others.length > 0 && !allowlistSlugs.includes(service.slug)
        ? `the resource URL belongs to registered service ${service.slug}, not to allowlisted service ${others.join(', ')}`
        : null;
      return { attributed: true, slug: service.slug, name: service.name, note };
    }
  }
  if (realmMismatches.length > 0) return { attributed: false, note: realmMismatches[0]! };
  const listed = allowlistSlugs.filter((slug) => services.some((s) => s.slug === slug));
  const unknown = allowlistSlugs.filter((slug) => !services.some((s) => s.slug === slug));
  if (listed.length > 0) return { attributed: false, note: `the resource URL is not under a registered base URL of allowlisted service ${listed.join(', ')}` };
  if (unknown.length > 0) return { attributed: false, note: `allowlisted service ${unknown.join(', ')} is not in the registry` };
  return { attributed: false, note: null };
}
