import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import { attributeResource } from '../../src/domain/attribution.js';
import type { StoreTables } from '../../src/store/port.js';
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
  const file = join(dir, 'paypolicy.db');
  const store = openStore(file, { capRows: false });
  for (const id of ['org_a', 'org_b']) {
    store.db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, 3600, 0)').run(id, id);
  }
  const slugOn = async (tables: Pick<StoreTables, 'services'>, orgId: string) => {
    const a = attributeResource(await tables.services.visibleIndex(orgId), [URL_PAID], 'x402', null, []);
    return a.attributed ? a.slug : null;
  };
  return { store, file, slugOn };
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

  test('behavior: a scope the open write has not changed is cached when read meanwhile; the one it changed is not', async () => {
    const { store, file, slugOn } = setup();
    try {
      await store.writes.run(async (tx) => {
        await tx.services.upsert(serviceRecord('b-own', ['https://svc.example/v1']), 'org_b', 5);
        expect([await slugOn(store.app, 'org_a'), await slugOn(store.app, 'org_b')]).toEqual([null, null]);
        expect([await slugOn(tx, 'org_a'), await slugOn(tx, 'org_b')]).toEqual([null, 'b-own']);
      });
      // Out of contract (README, Durability): another connection writes behind the store's back.
      // Attribution still answers organization A's cached scope, which shows it did not read the rows.
      const other = new Database(file);
      other.prepare(`INSERT INTO services (id, org_id, slug, name, description, category, logo_url, docs_url, payment_methods, endpoints, created_at, updated_at)
        VALUES ('behind', 'org_a', 'behind', 'behind', '', '', '', '', ?, '[]', 0, 0)`).run(JSON.stringify(serviceRecord('behind', ['https://svc.example/v1']).paymentMethods));
      other.close();
      expect([await slugOn(store.app, 'org_a'), await slugOn(store.app, 'org_b')]).toEqual([null, 'b-own']);
      expect(await store.writes.run((tx) => slugOn(tx, 'org_a'))).toBe(null);
    } finally {
      await store.close();
    }
  });
});
