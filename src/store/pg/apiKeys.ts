import type { ApiKeyMode, ApiKeyRecord } from '../../domain/types.js';
import { num, numOrNull, statement, type Sql } from './sql.js';
import type { ApiKeyRepository } from '../port.js';

type KeyRow = { id: string; org_id: string; mode: ApiKeyMode; prefix: string; label: string; created_at: bigint; revoked_at: bigint | null };

const COLUMNS = 'id, org_id, mode, prefix, label, created_at, revoked_at';
const INSERT = statement('key.insert', 'INSERT INTO api_keys (id, org_id, mode, prefix, key_hash, label, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)');
const BY_HASH = statement('key.byHash', `SELECT ${COLUMNS}, key_hash FROM api_keys WHERE key_hash = $1`);
const BY_ID = statement('key.byId', `SELECT ${COLUMNS} FROM api_keys WHERE id = $1`);
// FOR SHARE: a revoke's UPDATE waits for this transaction, or, having committed since this
// transaction's snapshot, makes this read a serialization failure (retried on a fresh snapshot).
// A plain read under SERIALIZABLE would let a payment decided on the old row commit after the
// revoke was acknowledged (serialized before it, but answered after it).
const BY_ID_FOR_USE = statement('key.byIdForUse', `SELECT ${COLUMNS} FROM api_keys WHERE id = $1 FOR SHARE`);
const BY_ORG = statement('key.byOrg', `SELECT ${COLUMNS} FROM api_keys WHERE org_id = $1 ORDER BY created_at DESC, id DESC`);
const REVOKE = statement('key.revoke', 'UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL');

function toKey(r: KeyRow): ApiKeyRecord {
  return {
    id: r.id, orgId: r.org_id, mode: r.mode, prefix: r.prefix, label: r.label, createdAt: num(r.created_at), revokedAt: numOrNull(r.revoked_at),
  };
}

/**
 * API keys, stored only as SHA-256 hashes (PostgreSQL twin of ../apiKeys.ts). No in-process
 * cache here: another replica may revoke a key at any moment, and until the caches are
 * invalidated across processes every lookup reads the row, so a revocation is seen by the very
 * next request on every replica.
 */
export function createPgApiKeyStore(sql: Sql): ApiKeyRepository {
  return {
    async insert(key, hash) {
      await sql.run(INSERT, [key.id, key.orgId, key.mode, key.prefix, hash, key.label, key.createdAt]);
    },
    async findByHash(hash) {
      const r = await sql.one<KeyRow & { key_hash: Buffer }>(BY_HASH, [hash]);
      return r && { ...toKey(r), hash: r.key_hash };
    },
    async get(id) {
      const r = await sql.one<KeyRow>(BY_ID, [id]);
      return r && toKey(r);
    },
    async getForUse(id) {
      const r = await sql.one<KeyRow>(BY_ID_FOR_USE, [id]);
      return r && toKey(r);
    },
    async listByOrg(orgId) {
      return (await sql.rows<KeyRow>(BY_ORG, [orgId])).map(toKey);
    },
    async revoke(id, now) {
      await sql.run(REVOKE, [now, id]);
    },
  };
}
