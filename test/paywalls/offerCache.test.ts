import { describe, expect, test } from 'vitest';
import type { Offer } from '../../src/paywalls/offer.js';
import { createOfferCache } from '../../src/paywalls/offerCache.js';

const probed = { offer: { rail: 'x402' } as Offer, chain: ['https://paywall.example/'] };

describe('createOfferCache', () => {
  test('behavior: one organization quoting endless URLs evicts only its own entries beyond its share; the others\' stay', () => {
    const cache = createOfferCache(() => 0, 100);
    for (let i = 0; i < 10; i++) cache.set('org-b', `https://b.example/${i}`, 'GET', probed);
    for (let i = 0; i < 1_000; i++) cache.set('org-a', `https://a.example/${i}`, 'GET', probed);
    for (let i = 0; i < 10; i++) expect(cache.get('org-b', `https://b.example/${i}`, 'GET')).toBe(probed);
    expect(cache.sizeOf('org-a')).toBe(75);
    expect(cache.size).toBe(85);
    // A keeps its newest entries.
    expect(cache.get('org-a', 'https://a.example/999', 'GET')).toBe(probed);
    expect(cache.get('org-a', 'https://a.example/924', 'GET')).toBeUndefined();
  });

  test('behavior: the whole cache stays within maxEntries, oldest first, however many organizations fill it', () => {
    const cache = createOfferCache(() => 0, 100);
    for (let i = 0; i < 500; i++) cache.set(`org-${i % 7}`, `https://p.example/${i}`, 'GET', probed);
    expect(cache.size).toBe(100);
    expect(cache.get('org-3', 'https://p.example/3', 'GET')).toBeUndefined();
    expect(cache.get('org-2', 'https://p.example/499', 'GET')).toBe(probed);
  });

  test('behavior: an entry past its time is gone, and no longer counts against its organization', () => {
    let now = 0;
    const cache = createOfferCache(() => now, 100, 1_000);
    cache.set('org-a', 'https://a.example/', 'GET', probed);
    now = 1_000;
    expect(cache.get('org-a', 'https://a.example/', 'GET')).toBeUndefined();
    expect(cache.sizeOf('org-a')).toBe(0);
    expect(cache.size).toBe(0);
  });
});
