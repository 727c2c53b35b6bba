import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import { generateApiKey } from '../../src/app/accounts/auth/credentials.js';
import { openStore } from '../../src/store/store.js';

/**
 * The deciding write re-reads the paying API key (app/payments/decide.ts, app/payments/replay.ts: `getForUse`) so a
 * revocation committed after the request was authenticated binds it. On SQLite that read is
 * answered from the record the authentication cached (store/apiKeys.ts), which holds only while
 * every revocation empties the cache before its UPDATE and nothing refills it from a reader that
 * cannot see a revocation still uncommitted.
 */

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-keycache-'));
  dirs.push(dir);
  const file = join(dir, 'paypolicy.db');
  const store = openStore(file, { capRows: false });
  const now = Date.now();
  store.db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)').run('org_keys', 'Keys', 3600, now);
  const generated = generateApiKey('test');
  const id = 'key_0123456789abcdef01234567';
  store.db.prepare('INSERT INTO api_keys (id, org_id, mode, prefix, key_hash, label, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
    .run(id, 'org_keys', 'test', generated.prefix, generated.hash, 'cached', now);
  /** Authentication's lookup: on the reader connection, outside any write. */
  const authenticate = () => store.app.apiKeys.findByHash(generated.hash);
  /** The deciding write's re-read, inside a write of the group commit. */
  const forUse = () => store.writes.run(async (tx) => tx.apiKeys.getForUse(id));
  return { store, file, id, authenticate, forUse, close: () => store.close() };
}

describe('the API key record the deciding write re-reads (SQLite)', () => {
  test('behavior: once authentication has cached the key, the write reads it from the cache', async () => {
    const { file, id, authenticate, forUse, close } = await setup();
    try {
      expect((await authenticate())?.id).toBe(id);
      // Out of contract (README, Durability): another connection revokes behind the store's back.
      // The write still answers the cached record, which shows it did not read the row.
      const other = new Database(file);
      other.prepare('UPDATE api_keys SET revoked_at = 1 WHERE id = ?').run(id);
      other.close();
      expect((await forUse())?.revokedAt).toBeNull();
    } finally {
      await close();
    }
  });

  test('error: a revocation through the store binds the next write at once, in the same transaction too', async () => {
    const { store, id, authenticate, forUse, close } = await setup();
    try {
      await authenticate();
      expect((await forUse())?.revokedAt).toBeNull();
      const seen = await store.writes.run(async (tx) => {
        await tx.apiKeys.revoke(id, 1234);
        return tx.apiKeys.getForUse(id);
      });
      expect(seen?.revokedAt).toBe(1234);
      expect((await forUse())?.revokedAt).toBe(1234);
      // Authenticating again reads the revoked row; the write still sees it revoked.
      expect((await authenticate())?.revokedAt).toBe(1234);
      expect((await forUse())?.revokedAt).toBe(1234);
    } finally {
      await close();
    }
  });

  test('error: a reader lookup while a revocation is uncommitted does not put the old row back', async () => {
    const { store, id, authenticate, forUse, close } = await setup();
    try {
      await authenticate();
      let lookedUp: Awaited<ReturnType<typeof authenticate>>;
      await store.writes.run(async (tx) => {
        await tx.apiKeys.revoke(id, 5678);
        // The reader sees the committed row (not revoked yet) while this transaction is open.
        lookedUp = await authenticate();
      });
      expect(lookedUp!?.revokedAt).toBeNull();
      expect((await forUse())?.revokedAt).toBe(5678);
    } finally {
      await close();
    }
  });

  test('behavior: a revocation rolled back leaves the key usable', async () => {
    const { store, id, authenticate, forUse, close } = await setup();
    try {
      await authenticate();
      await expect(store.writes.run(async (tx) => {
        await tx.apiKeys.revoke(id, 9999);
        throw new Error('rolled back');
      })).rejects.toThrow('rolled back');
      expect((await forUse())?.revokedAt).toBeNull();
      expect((await authenticate())?.revokedAt).toBeNull();
    } finally {
      await close();
    }
  });
});
