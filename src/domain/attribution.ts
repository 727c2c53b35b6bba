import { indexRegistry, type RegistryIndex } from './indexRegistry.js';
import type { AttributedService } from './types.js';

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

function underPath(path: string, base: string): boolean {
  const basePath = base.endsWith('/') ? base : `${base}/`;
  return path === base || path.startsWith(basePath);
}

/** Decodes `%XX` runs (as UTF-8 where they form it, else byte by byte) and IIS-style `%uXXXX`. */
function decodeOnce(path: string): string {
  return path
    .replace(/%u([0-9a-f]{4})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    .replace(/(?:%[0-9a-f]{2})+/gi, (run) => {
      try {
        return decodeURIComponent(run);
      } catch {
        return run.replace(/%([0-9a-f]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
      }
    });
}

/**
 * The path as the most lenient front end could route it: escapes decoded until nothing changes
 * (proxies that decode again), Unicode compatibility forms folded (fullwidth `．` and `／`), `\`
 * read as `/`, `;params` and anything after a NUL dropped from segments (Tomcat), slashes merged
 * (nginx), dot segments resolved. WHATWG URL leaves `/a/..%2Fb` and `/a/..;/b` under `/a`, but
 * nginx or Tomcat serve them from `/b`.
 */
function leniently(pathname: string): string {
  let routed = lenientPaths.get(pathname);
  if (routed === undefined) {
    // Attribution asks once per candidate base URL; the memo keeps that linear in the path.
    if (lenientPaths.size >= 1_000) lenientPaths.clear();
    routed = routeLeniently(pathname);
    lenientPaths.set(pathname, routed);
  }
  return routed;
}

const lenientPaths = new Map<string, string>();

function routeLeniently(pathname: string): string {
  let path = pathname;
  for (let i = 0; i < 10; i++) {
    const decoded = decodeOnce(path);
    if (decoded === path) break;
    path = decoded;
  }
  const segments: string[] = [];
  for (const raw of path.normalize('NFKC').replace(/\\/g, '/').split('/').slice(1)) {
    const segment = raw.split(/[;\0]/)[0]!;
    if (segment === '..') segments.pop();
    else if (segment !== '.' && segment !== '') segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

/** Same origin and under the base path, both as parsed and as a lenient front end would route it. */
function underBase(resource: URL, base: URL): boolean {
  if (resource.origin !== base.origin) return false;
  return underPath(resource.pathname, base.pathname) && underPath(leniently(resource.pathname), leniently(base.pathname));
}

function parse(url: string): URL | null {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/** Whether a URL lies under one of the base URLs `service` registered for `rail`. */
function coveredBy(service: AttributedService, rail: 'x402' | 'mpp', url: URL): boolean {
  return service.paymentMethods.some((m) => {
    if (m.protocol !== '' && m.protocol !== rail) return false;
    const base = m.baseUrl === '' ? null : parse(m.baseUrl);
    return base !== null && underBase(url, base);
  });
}

/** Why `service` cannot vouch for a chain it does not cover hop by hop; null when it covers every hop. */
function strayNote(service: AttributedService, rail: 'x402' | 'mpp', hops: readonly URL[], allowlistSlugs: readonly string[]): string | null {
  const i = hops.findIndex((hop) => !coveredBy(service, rail, hop));
  if (i < 0) return null;
  const who = `${allowlistSlugs.includes(service.slug) ? 'allowlisted' : 'registered'} service ${service.slug}`;
  const where = i === 0 ? `the request started at ${hops[i]!.href}` : `the request was redirected to ${hops[i]!.href}`;
  return `${who} cannot vouch: ${where}, outside its registered base URL`;
}

/**
 * Finds the service a paid resource belongs to. `chain` is every URL the probe requested, in
 * order: the URL the agent gave, then each redirect target; the last one answered with the 402.
 * The registry vouches only when one service covers the whole chain: the answering URL under a
 * base URL (and realm) of the service for the rail, and every earlier hop under one of its base
 * URLs for the rail too, so an open redirect under a registered base URL cannot lend the service's
 * name to another paywall. `allowlistSlugs` only shapes the note that explains why an allowlisted
 * service did not cover this payment. `registry` is the list in registry order or its index
 * (indexRegistry.ts): only services with a base URL the answering URL could lie under, and those
 * the allowlist names, are examined, so the cost does not grow with the registry.
 */
export function attributeResource(
  registry: readonly AttributedService[] | RegistryIndex,
  chain: readonly string[],
  rail: 'x402' | 'mpp',
  realm: string | null,
  allowlistSlugs: readonly string[],
): Attribution {
  const parsed = chain.map(parse);
  if (parsed.length === 0 || parsed.some((hop) => hop === null)) return { attributed: false, note: null };
  const index = 'candidates' in registry ? registry : indexRegistry(registry);
  const hops = parsed as URL[];
  const resource = hops[hops.length - 1]!;
  const realmMismatches: string[] = [];
  let strayed: string | null = null;
  // A base URL of another origin, or of a path the resource's path cannot lie under, never covers
  // the resource (underBase), so no other service can match.
  for (const service of index.candidates(resource)) {
    for (const method of service.paymentMethods) {
      if (method.protocol !== '' && method.protocol !== rail) continue;
      const base = method.baseUrl === '' ? null : parse(method.baseUrl);
      if (!base || !underBase(resource, base)) continue;
      if (rail === 'mpp' && method.realm !== '' && method.realm !== realm) {
        realmMismatches.push(`realm "${realm ?? ''}" does not match the registered realm "${method.realm}" of service ${service.slug}`);
        continue;
      }
      const stray = strayNote(service, rail, hops, allowlistSlugs);
      if (stray !== null) {
        strayed ??= stray;
        break;
      }
      // Attributed, but possibly to a service the agent does not allow: say which ones it does.
      const others = allowlistSlugs.filter((slug) => slug !== service.slug);
      const note = others.length > 0 && !allowlistSlugs.includes(service.slug)
        ? `the resource URL belongs to registered service ${service.slug}, not to allowlisted service ${others.join(', ')}`
        : null;
      return { attributed: true, slug: service.slug, name: service.name, note };
    }
  }
  // An allowlisted service that covers part of the chain is the one the agent trusted: name it.
  for (const slug of allowlistSlugs) {
    const service = index.bySlug(slug);
    if (service && hops.some((hop) => coveredBy(service, rail, hop))) {
      const stray = strayNote(service, rail, hops, allowlistSlugs);
      if (stray !== null) return { attributed: false, note: stray };
    }
  }
  if (strayed !== null) return { attributed: false, note: strayed };
  if (realmMismatches.length > 0) return { attributed: false, note: realmMismatches[0]! };
  const listed = allowlistSlugs.filter((slug) => index.bySlug(slug) !== undefined);
  const unknown = allowlistSlugs.filter((slug) => index.bySlug(slug) === undefined);
  if (listed.length > 0) return { attributed: false, note: `the resource URL is not under a registered base URL of allowlisted service ${listed.join(', ')}` };
  if (unknown.length > 0) return { attributed: false, note: `allowlisted service ${unknown.join(', ')} is not in the registry` };
  return { attributed: false, note: null };
}
