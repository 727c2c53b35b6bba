import { tenantShare } from '../overload/admission.js';
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
  /** Entries one organization holds now. */
  sizeOf(orgId: string): number;
};

type Entry = { orgId: string; probed: CachedOffer; expiresAt: number };

/**
 * Parsed offers by (organization, url, method), for 60 seconds, at most `maxEntries` of them: the
 * oldest entry goes first (a Map keeps insertion order), so agents probing many URLs cannot grow
 * memory without bound. One organization holds at most `maxPerOrg` (three quarters by default, as
 * every shared bound: overload/admission.ts tenantShare); beyond that its own oldest entry makes room, so
 * one tenant quoting endless URLs never evicts the last quarter that others' quotes reuse. The
 * verdict is not cached: it is re-evaluated for the asking agent.
 */
export function createOfferCache(now: () => number, maxEntries = 1000, ttlMs = OFFER_TTL_MS, maxPerOrg = tenantShare(maxEntries)): OfferCache {
  const entries = new Map<string, Entry>();
  /** Each organization's keys, oldest first (a Set keeps insertion order). */
  const byOrg = new Map<string, Set<string>>();
  const key = (orgId: string, url: string, method: string) => `${orgId}\u0000${method}\u0000${url}`;
  const remove = (k: string) => {
    const e = entries.get(k);
    if (!e) return;
    entries.delete(k);
    const keys = byOrg.get(e.orgId)!;
    keys.delete(k);
    if (keys.size === 0) byOrg.delete(e.orgId);
  };
  return {
    get(orgId, url, method) {
      const k = key(orgId, url, method);
      const e = entries.get(k);
      if (!e) return undefined;
      if (e.expiresAt <= now()) {
        remove(k);
        return undefined;
      }
      return e.probed;
    },
    set(orgId, url, method, probed) {
      const k = key(orgId, url, method);
      remove(k);
      while ((byOrg.get(orgId)?.size ?? 0) >= maxPerOrg) remove(byOrg.get(orgId)!.values().next().value!);
      while (entries.size >= maxEntries) remove(entries.keys().next().value!);
      entries.set(k, { orgId, probed, expiresAt: now() + ttlMs });
      let keys = byOrg.get(orgId);
      if (!keys) byOrg.set(orgId, (keys = new Set()));
      keys.add(k);
    },
    get size() {
      return entries.size;
    },
    sizeOf: (orgId) => byOrg.get(orgId)?.size ?? 0,
  };
}
