import type { Db } from './db.js';
import type { ApiKeyMode, ApiKeyRecord } from '../domain/types.js';
import type { SharedCache } from './agents.js';
import type { ApiKeyRepository } from './port.js';
import type { Synchronous } from './syncTables.js';

type CachedKey = ApiKeyRecord & { hash: Buffer };

/**
 * The key records cached by hash (authentication) and by id (the deciding write's re-read of the
 * key), filled together under one rule and dropped together by `revoke`.
 */
export type ApiKeyCache = SharedCache<CachedKey> & { byId: Map<string, CachedKey> };

type KeyRow = { id: string; org_id: string; mode: ApiKeyMode; prefix: string; label: string; created_at: number; revoked_at: number | null };

function toKey(r: KeyRow): ApiKeyRecord {
  return { id: r.id, orgId: r.org_id, mode: r.mode, prefix: r.prefix, label: r.label, createdAt: r.created_at, revokedAt: r.revoked_at };
}

const COLUMNS = 'id, org_id, mode, prefix, label, created_at, revoked_at';

/**
 * API keys, stored only as SHA-256 hashes of the plaintext. Lookups by hash are cached; every
 * write goes through this module and clears the cache in the same call, so a revocation is seen
 * by the very next request.
 */
export function createApiKeyStore(db: Db, shared?: ApiKeyCache): Synchronous<ApiKeyRepository> {
  // Shared with the reader connection's instance (store.ts; agents.ts SharedCache).
  const byHashCache = shared?.records ?? new Map<string, CachedKey>();
  const byIdCache = shared?.byId ?? new Map<string, CachedKey>();
  const cacheable = shared?.cacheable ?? (() => !db.inTransaction);
  const insert = db.prepare('INSERT INTO api_keys (id, org_id, mode, prefix, key_hash, label, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const byHash = db.prepare(`SELECT ${COLUMNS}, key_hash FROM api_keys WHERE key_hash = ?`);
  const byId = db.prepare(`SELECT ${COLUMNS} FROM api_keys WHERE id = ?`);
  const byOrg = db.prepare(`SELECT ${COLUMNS} FROM api_keys WHERE org_id = ? ORDER BY created_at DESC, id DESC`);
  const revoke = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL');
  return {
    insert(key: ApiKeyRecord, hash: Buffer): void {
      insert.run(key.id, key.orgId, key.mode, key.prefix, hash, key.label, key.createdAt);
    },
    findByHash(hash: Buffer): (ApiKeyRecord & { hash: Buffer }) | undefined {
      const k = hash.toString('hex');
      const hit = byHashCache.get(k);
      if (hit) return hit;
      const r = byHash.get(hash) as (KeyRow & { key_hash: Buffer }) | undefined;
      if (!r) return undefined;
      const key = { ...toKey(r), hash: r.key_hash };
      // Bounded: unknown keys are never cached, and an organization has few keys.
      if (byHashCache.size < 10_000 && cacheable()) {
        byHashCache.set(k, key);
        byIdCache.set(key.id, key);
      }
      return key;
    },
    get(id: string): ApiKeyRecord | undefined {
      const r = byId.get(id) as KeyRow | undefined;
      return r && toKey(r);
    },
    /**
     * The key row for a write that acts on the key being valid (deciding or collecting a payment),
     * held against a concurrent revoke until the write commits. SQLite's writes are serialized,
     * so this is `get`, answered from the cache the request's authentication filled: a revoke
     * empties it in the same call, before its UPDATE, so a write after it (in the same
     * transaction or a later one) reads the row. PostgreSQL's twin locks the row.
     */
    getForUse(id: string): ApiKeyRecord | undefined {
      const hit = byIdCache.get(id);
      if (hit) return hit;
      const r = byId.get(id) as KeyRow | undefined;
      return r && toKey(r);
    },
    listByOrg(orgId: string): ApiKeyRecord[] {
      return (byOrg.all(orgId) as KeyRow[]).map(toKey);
    },
    revoke(id: string, now: number): void {
      byHashCache.clear();
      byIdCache.clear();
      revoke.run(now, id);
    },
  };
}
export type ApiKeyStore = ReturnType<typeof createApiKeyStore>;
