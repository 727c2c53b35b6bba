import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { attributeResource } from '../../src/domain/attribution.js';
import { openDatabase, writeTxn } from '../../src/store/db.js';
import { ScopeCache, SCOPE_FLOOR_BYTES, SHARED_SCOPE } from '../../src/store/registryCache.js';
import { createServiceStore, type RegistryScopeCache } from '../../src/store/services.js';
import { serviceRecord } from '../helpers/registry.js';

/**
 * The registry's per-scope cache is bounded: organizations' scopes weigh what their summaries
 * hold (SCOPE_FLOOR_BYTES at least), and past the budget the least recently used go, so neither
 * one organization's registry nor many organizations grow the process without bound. The shared
 * scope, read by every attribution, is kept apart and never evicted.
 */
const entry = (weight: number) => ({ weight });

describe('ScopeCache', () => {
  test('behavior: past the budget the least recently used organization goes first; a read makes an entry recent', () => {
    const cache = new ScopeCache<{ weight: number }>(10 * 1024);
    for (const key of ['a', 'b', 'c']) cache.set(key, entry(3 * 1024));
    expect(cache.get('a')).toBeDefined();
    cache.set('d', entry(3 * 1024));
    expect(['a', 'b', 'c', 'd'].map((k) => cache.get(k) !== undefined)).toEqual([true, false, true, true]);
    expect(cache.stats()).toEqual({ scopes: 3, bytes: 9 * 1024 });
    cache.set('c', entry(1024));
    expect(cache.stats()).toEqual({ scopes: 3, bytes: 7 * 1024 });
    cache.delete('a');
    expect(cache.stats()).toEqual({ scopes: 2, bytes: 4 * 1024 });
  });

  test('behavior: every entry costs at least the floor; one heavier than the budget is not kept; the shared scope is apart', () => {
    const cache = new ScopeCache<{ weight: number }>(4 * SCOPE_FLOOR_BYTES);
    for (let i = 0; i < 10; i++) cache.set(`org-${i}`, entry(1));
    expect(cache.stats()).toEqual({ scopes: 4, bytes: 4 * SCOPE_FLOOR_BYTES });
    cache.set('huge', entry(4 * SCOPE_FLOOR_BYTES + 1));
    expect(cache.get('huge')).toBeUndefined();
    expect(cache.stats().scopes).toBe(4);
    const shared = entry(100 * SCOPE_FLOOR_BYTES);
    cache.set(SHARED_SCOPE, shared);
    for (let i = 10; i < 20; i++) cache.set(`org-${i}`, entry(1));
    expect(cache.get(SHARED_SCOPE)).toBe(shared);
    expect(cache.stats()).toEqual({ scopes: 4, bytes: 4 * SCOPE_FLOOR_BYTES });
  });
});

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the SQLite registry cache under many organizations', () => {
  test('behavior: reading every organization\'s scope keeps the cache within its budget, and an evicted scope attributes as before', () => {
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-registry-cache-'));
    dirs.push(dir);
    const db = openDatabase(join(dir, 'paypolicy.db'));
    const budget = 16 * SCOPE_FLOOR_BYTES;
    const scopes = new ScopeCache<RegistryScopeCache>(budget);
    const services = createServiceStore(db, { scopes, dirty: new Set(), writing: () => db.inTransaction, inSnapshot: () => false });
    const orgs = Array.from({ length: 100 }, (_, i) => `org_${String(i).padStart(8, '0')}`);
    writeTxn(db, () => {
      for (const id of orgs) {
        db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, 3600, 0)').run(id, id);
        services.upsert(serviceRecord(`svc-${id.slice(-3)}`, [`https://${id.slice(-3)}.example/v1`]), id, 1);
      }
    });
    const slugOf = (orgId: string) => {
      const a = attributeResource(services.visibleIndex(orgId), [`https://${orgId.slice(-3)}.example/v1/paid`], 'x402', null, []);
      return a.attributed ? a.slug : null;
    };
    for (const id of orgs) expect(slugOf(id)).toBe(`svc-${id.slice(-3)}`);
    expect(scopes.stats().scopes).toBe(16);
    expect(scopes.stats().bytes).toBeLessThanOrEqual(budget);
    // The first organizations were evicted long ago: rebuilt on demand, the same answer.
    expect(slugOf(orgs[0]!)).toBe(`svc-${orgs[0]!.slice(-3)}`);
    expect(services.summaries(orgs[0]!).map((s) => [s.slug, s.endpointCount])).toEqual([[`svc-${orgs[0]!.slice(-3)}`, 0]]);
    db.close();
  });
});
