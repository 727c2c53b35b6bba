import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { attributeResource } from '../../src/domain/attribution.js';
import type { StoreTables } from '../../src/store/asyncStore.js';
import { openStore } from '../../src/store/store.js';
import { serviceRecord } from '../helpers/registry.js';

/**
 * SQLite keeps each registry scope's records and attribution index in memory, shared by the
 * writer and the reader connection (store/services.ts). Every change through the store drops
 * the scope it changes, and only that one, so attribution on either connection sees each
 * committed change at once, and never what a rolled-back write saw of its own change.
 */
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const URL_PAID = 'https://svc.example/v1/paid';
function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-registry-index-'));
  dirs.push(dir);
  const store = openStore(join(dir, 'paypolicy.db'), { capRows: false });
  for (const id of ['org_a', 'org_b']) {
    store.db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, 3600, 0)').run(id, id);
  }
  const slugOn = async (tables: Pick<StoreTables, 'services'>, orgId: string) => {
    const a = attributeResource(await tables.services.visibleIndex(orgId), [URL_PAID], 'x402', null, []);
    return a.attributed ? a.slug : null;
  };
  return { store, slugOn };
}

describe('the registry index cache (SQLite)', () => {
  test('behavior: each committed change is attributed next, on the reader and inside a write, for the organization it belongs to only', async () => {
    const { store, slugOn } = setup();
    try {
      expect([await slugOn(store.app, 'org_a'), await slugOn(store.app, 'org_b')]).toEqual([null, null]);
      await store.writes.run((tx) => tx.services.upsert(serviceRecord('own', ['https://svc.example/v1']), 'org_a', 1));
      expect([await slugOn(store.app, 'org_a'), await slugOn(store.app, 'org_b')]).toEqual(['own', null]);
      expect(await store.writes.run((tx) => slugOn(tx, 'org_a'))).toBe('own');
      await store.writes.run((tx) => tx.services.upsert(serviceRecord('own', ['https://elsewhere.example/v1']), 'org_a', 2));
      expect(await slugOn(store.app, 'org_a')).toBe(null);
      await store.writes.run((tx) => tx.services.upsert(serviceRecord('shared', ['https://svc.example/']), null, 3));
      expect([await slugOn(store.app, 'org_a'), await slugOn(store.app, 'org_b')]).toEqual(['shared', 'shared']);
      await store.writes.run((tx) => tx.services.delete('shared', null));
      expect([await slugOn(store.app, 'org_a'), await slugOn(store.app, 'org_b')]).toEqual([null, null]);
    } finally {
      await store.close();
    }
  });

  test('behavior: a write sees its own change; after it rolls back, nobody attributes by it', async () => {
    const { store, slugOn } = setup();
    try {
      expect(await slugOn(store.app, 'org_a')).toBe(null);
      const refused = store.writes.run(async (tx) => {
        await tx.services.upsert(serviceRecord('rolled-back', ['https://svc.example/v1']), 'org_a', 4);
        expect(await slugOn(tx, 'org_a')).toBe('rolled-back');
        throw new Error('roll back');
      });
      await expect(refused).rejects.toThrow('roll back');
      expect(await slugOn(store.app, 'org_a')).toBe(null);
      expect(await store.writes.run((tx) => slugOn(tx, 'org_a'))).toBe(null);
    } finally {
      await store.close();
    }
  });
});
