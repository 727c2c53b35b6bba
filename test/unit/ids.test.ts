import { describe, expect, test } from 'vitest';
import { newUuid } from '../../src/store/ids.js';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newUuid', () => {
  test('behavior: an RFC 9562 version 7 UUID whose first 48 bits are the creation time in ms', () => {
    const at = Date.UTC(2026, 10, 24, 7, 0, 0, 123);
    const id = newUuid(at);
    expect(id).toMatch(V7);
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(at);
  });

  test('behavior: ids made later sort after earlier ones, so new rows append to the id index', () => {
    const ids = Array.from({ length: 50 }, (_, i) => newUuid(1_700_000_000_000 + i));
    expect([...ids].sort()).toEqual(ids);
  });

  test('behavior: ids of the same millisecond differ in their random bits', () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => newUuid(1_700_000_000_000)));
    expect(ids.size).toBe(10_000);
    for (const id of ids) expect(id.slice(0, 13)).toBe('018bcfe5-6800');
  });

  test('edge: a clock before 1970 or past 10889 is clamped, never a malformed id', () => {
    expect(newUuid(-5)).toMatch(V7);
    expect(newUuid(-5).slice(0, 13)).toBe('00000000-0000');
    expect(newUuid(2 ** 50)).toMatch(V7);
    expect(newUuid(2 ** 50).slice(0, 13)).toBe('ffffffff-ffff');
  });
});
