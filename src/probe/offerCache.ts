import type { Offer } from './offer.js';

/**
 * A cached probe: the offer and the redirect chain that led to it. The chain is cached with the
 * offer because attribution on a cache hit must judge the same hops the offer came through.
 */
export type CachedOffer = { offer: Offer; chain: readonly string[] };

/** Quote answers are reused for this long per (organization, url, method), as the wire protocol says. */
export const OFFER_TTL_MS = 60_000;

export type OfferCache = {
  get(orgId: string, url: string, method: string): CachedOffer | undefined;
  set(orgId: string, url: string, method: string, probed: CachedOffer): void;
  readonly size: number;
};

/**
 * Parsed offers by (organization, url, method), for 60 seconds, at most `maxEntries` of them: the
 * oldest entry goes first (a Map keeps insertion order), so agents probing many URLs cannot grow
 * memory without bound. The verdict is not cached: it is re-evaluated for the asking agent.
 */
export function createOfferCache(now: () => number, maxEntries = 1000, ttlMs = OFFER_TTL_MS): OfferCache {
  const entries = new Map<string, { probed: CachedOffer; expiresAt: number }>();
  const key = (orgId: string, url: string, method: string) => `${orgId}\u0000${method}\u0000${url}`;
  return {
    get(orgId, url, method) {
      const k = key(orgId, url, method);
      const e = entries.get(k);
      if (!e) return undefined;
      if (e.expiresAt <= now()) {
        entries.delete(k);
        return undefined;
      }
      return e.probed;
    },
    set(orgId, url, method, probed) {
      const k = key(orgId, url, method);
      entries.delete(k);
      entries.set(k, { probed, expiresAt: now() + ttlMs });
      while (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
    },
    get size() {
      return entries.size;
    },
  };
}
