import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { openStore } from '../../src/store/store.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** SQLite's temporary files this process holds open (unlinked at once, so only /proc/self/fd shows them). */
function openTempFiles(): string[] {
  return readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      return /etilqs_/.test(target) ? [target] : [];
    } catch {
      return [];
    }
  });
}

// Each group write runs in a savepoint, and SQLite journals the pages a savepoint changes. A journal
// past 64 KiB spilled to a temp file and stayed one for the rest of the group's transaction, every
// page after that costing pwrite calls on the event loop (src/store/store.ts).
test('behavior: a group whose first write changes more than 64 KiB journals the next writes in memory, not in a temp file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-sjournal-'));
  dirs.push(dir);
  const store = openStore(join(dir, 'p.db'), { capRows: false });
  try {
    const big = 'x'.repeat(3000);
    // Pages that exist before a savepoint are what it journals (new pages need no undo).
    await store.writes.run(() => {
      for (let i = 0; i < 60; i++) store.settings.set(`big${i}`, big);
    });
    const seen: string[][] = [];
    await Promise.all([
      store.writes.run(() => {
        for (let i = 0; i < 60; i++) store.settings.set(`big${i}`, big.toUpperCase());
      }),
      store.writes.run(() => {
        store.settings.set('after', big);
        seen.push(openTempFiles());
      }),
    ]);
    expect(store.settings.get('big59')).toBe(big.toUpperCase());
    expect(store.settings.get('after')).toBe(big);
    expect(seen).toEqual([[]]);
  } finally {
    await store.close();
  }
});

// The journal in memory is what a failed write rolls back from: its own changes go, its
// neighbours' stay, even after an earlier write in the same group changed more than 64 KiB.
test('behavior: a write that throws in a group rolls back only its own changes, after a large write and before another', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-sjournal-'));
  dirs.push(dir);
  const store = openStore(join(dir, 'p.db'), { capRows: false });
  try {
    const big = 'x'.repeat(3000);
    await store.writes.run(() => {
      for (let i = 0; i < 60; i++) store.settings.set(`big${i}`, big);
    });
    const outcomes = await Promise.allSettled([
      store.writes.run(() => {
        for (let i = 0; i < 60; i++) store.settings.set(`big${i}`, 'a'.repeat(3000));
      }),
      store.writes.run(() => {
        for (let i = 0; i < 60; i += 2) store.settings.set(`big${i}`, 'b'.repeat(3000));
        store.settings.set('failed', 'b');
        throw new Error('refused');
      }),
      store.writes.run(() => store.settings.set('after', 'c')),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    for (let i = 0; i < 60; i++) expect(store.settings.get(`big${i}`)).toBe('a'.repeat(3000));
    expect(store.settings.get('failed')).toBeUndefined();
    expect(store.settings.get('after')).toBe('c');
  } finally {
    await store.close();
  }
});
