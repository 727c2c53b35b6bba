import type { Offer } from './offer.js';

/** Quote answers are reused for this long per (organization, url, method), as the wire protocol says. */
export const OFFER_TTL_MS = 60_000;

export type OfferCache = {
  get(orgId: string, url: string, method: string): Offer | undefined;
  set(orgId: string, url: string, method: string, offer: Offer): void;
  readonly size: number;
};

/**
 * Parsed offers by (organization, url, method), for 60 seconds, at most `maxEntries` of them: the
 * oldest entry goes first (a Map keeps insertion order), so agents probing many URLs cannot grow
 * memory without bound. The verdict is not cached: it is re-evaluated for the asking agent.
 */
export function createOfferCache(now: () => number, maxEntries = 1000, ttlMs = OFFER_TTL_MS): OfferCache {
  const entries = new Map<string, { offer: Offer; expiresAt: number }>();
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
      return e.offer;
    },
    set(orgId, url, method, offer) {
      const k = key(orgId, url, method);
      entries.delete(k);
      entries.set(k, { offer, expiresAt: now() + ttlMs });
      while (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
    },
    get size() {
      return entries.size;
    },
  };
}
