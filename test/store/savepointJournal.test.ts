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

const BIG = 'x'.repeat(3000);

/**
 * A store whose settings hold 60 rows of 3,000 bytes, committed: pages that exist before a
 * savepoint are what it journals (new pages need no undo), so rewriting them all in one write
 * journals well over 64 KiB. Closed after `fn`.
 */
async function withFilledStore(fn: (store: ReturnType<typeof openStore>) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-sjournal-'));
  dirs.push(dir);
  const store = openStore(join(dir, 'p.db'), { capRows: false });
  try {
    await store.writes.run(() => {
      for (let i = 0; i < 60; i++) store.settings.set(`big${i}`, BIG);
    });
    await fn(store);
  } finally {
    await store.close();
  }
}

// Each group write runs in a savepoint, and SQLite journals the pages a savepoint changes. A journal
// past 64 KiB spilled to a temp file and stayed one for the rest of the group's transaction, every
// page after that costing pwrite calls on the event loop (src/store/store.ts).
test('behavior: a group whose first write changes more than 64 KiB journals the next writes in memory, not in a temp file', async () => {
  await withFilledStore(async (store) => {
    const seen: string[][] = [];
    await Promise.all([
      store.writes.run(() => {
        for (let i = 0; i < 60; i++) store.settings.set(`big${i}`, BIG.toUpperCase());
      }),
      store.writes.run(() => {
        store.settings.set('after', BIG);
        seen.push(openTempFiles());
      }),
    ]);
    expect(store.settings.get('big59')).toBe(BIG.toUpperCase());
    expect(store.settings.get('after')).toBe(BIG);
    expect(seen).toEqual([[]]);
  });
});

// The journal in memory is what a failed write rolls back from: its own changes go, its
// neighbours' stay, even after an earlier write in the same group changed more than 64 KiB.
test('behavior: a write that throws in a group rolls back only its own changes, after a large write and before another', async () => {
  await withFilledStore(async (store) => {
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
  });
});
