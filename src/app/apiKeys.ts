import { generateApiKey } from '../auth/credentials.js';
import { DomainError, invalidArgument } from '../domain/errors.js';
import type { ApiKeyMode, ApiKeyRecord } from '../domain/types.js';
import { KEY_ID, optionalText, requireId } from '../domain/validate.js';
import { writeTxn } from '../store/db.js';
import { newId } from '../store/ids.js';
import type { AppDeps } from './deps.js';
import { requireOrganization } from './organizations.js';

export function createApiKey(deps: AppDeps, input: { orgId: string; mode: ApiKeyMode | undefined; label: string }): { key: ApiKeyRecord; plaintext: string } {
  if (input.mode !== 'live' && input.mode !== 'test') throw invalidArgument('mode must be live or test');
  const label = optionalText(input.label.trim(), 'label', 200);
  const generated = generateApiKey(input.mode);
  return writeTxn(deps.store.db, () => {
    requireOrganization(deps, input.orgId);
    const key: ApiKeyRecord = {
      id: newId('key'), orgId: input.orgId, mode: input.mode!, prefix: generated.prefix, label,
      createdAt: deps.now(), revokedAt: null,
    };
    deps.store.apiKeys.insert(key, generated.hash);
    return { key, plaintext: generated.plaintext };
  });
}

/** Revokes a key; revoking twice is harmless and keeps the first revocation time. */
export function revokeApiKey(deps: AppDeps, keyId: string): ApiKeyRecord {
  requireId(keyId, KEY_ID, 'id');
  return writeTxn(deps.store.db, () => {
    if (!deps.store.apiKeys.get(keyId)) throw new DomainError('not_found', 'API key not found', { code: 'api_key_not_found' });
    deps.store.apiKeys.revoke(keyId, deps.now());
    return deps.store.apiKeys.get(keyId)!;
  });
}

export function listApiKeys(deps: AppDeps, orgId: string): ApiKeyRecord[] {
  requireOrganization(deps, orgId);
  return deps.store.apiKeys.listByOrg(orgId);
}
