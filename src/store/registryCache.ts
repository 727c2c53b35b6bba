/**
 * Most bytes of registry summaries (slugs, names, categories, docs URLs and payment-method JSON)
 * the organizations' scopes may keep in memory together. One organization's scope is at most its
 * registry bound (4 MiB of records, app/registry/registry.ts) and in practice a few KiB, so thousands of
 * organizations fit, and no number of them, nor any one's registry, grows the process past this.
 */
export const REGISTRY_CACHE_BYTES = 16 * 1024 * 1024;

/**
 * What an organization's entry costs at least, whatever it holds: an empty scope is still a map
 * entry, an array and an index, so many organizations with nothing registered are bounded too.
 */
export const SCOPE_FLOOR_BYTES = 1024;

/** The shared records' scope key: read by every organization, and the operator's to size. */
export const SHARED_SCOPE = '';

/**
 * One registry scope's cached entry per key, least recently used first out once the entries'
 * weights pass the budget. The shared scope is held apart (never evicted, never counted): every
 * attribution reads it, and only the operator writes it. An entry heavier than the whole budget is
 * not kept at all: its reader rebuilds it each time rather than flushing every other organization.
 */
export class ScopeCache<V extends { weight: number }> {
  private readonly entries = new Map<string, V>();
  private shared: V | undefined;
  private total = 0;

  constructor(private readonly budget = REGISTRY_CACHE_BYTES) {}

  get(key: string): V | undefined {
    if (key === SHARED_SCOPE) return this.shared;
    const hit = this.entries.get(key);
    if (hit) {
      // Map order is insertion order: moving the entry to the end makes it the most recent.
      this.entries.delete(key);
      this.entries.set(key, hit);
    }
    return hit;
  }

  set(key: string, value: V): void {
    if (key === SHARED_SCOPE) {
      this.shared = value;
      return;
    }
    this.delete(key);
    const cost = costOf(value);
    if (cost > this.budget) return;
    this.entries.set(key, value);
    this.total += cost;
    for (const [oldest, entry] of this.entries) {
      if (this.total <= this.budget) break;
      this.entries.delete(oldest);
      this.total -= costOf(entry);
    }
  }

  delete(key: string): void {
    if (key === SHARED_SCOPE) {
      this.shared = undefined;
      return;
    }
    const old = this.entries.get(key);
    if (!old) return;
    this.entries.delete(key);
    this.total -= costOf(old);
  }

  /** The organizations' entries kept and what they weigh together (the shared scope apart). */
  stats(): { scopes: number; bytes: number } {
    return { scopes: this.entries.size, bytes: this.total };
  }
}

function costOf(value: { weight: number }): number {
  return Math.max(value.weight, SCOPE_FLOOR_BYTES);
}
