import { timingSafeEqual } from 'node:crypto';
import { bearerToken, generateApiKey, hashSecret, isApiKeyShaped, unauthenticated } from './auth/credentials.js';
import { DomainError, invalidArgument } from '../../domain/errors.js';
import type { ApiKeyMode, ApiKeyPrincipal, ApiKeyRecord, Principal } from '../../domain/types.js';
import { KEY_ID, optionalText } from '../../domain/validate.js';
import { newId } from '../../store/ids.js';
import { requireAccess } from '../access.js';
import type { AppDeps } from '../deps.js';
import { requireOrgAccess } from '../access.js';
import { withinWrite } from '../withinWrite.js';

export async function createApiKey(deps: AppDeps, principal: Principal, input: { orgId: string; mode: ApiKeyMode | undefined; label: string }): Promise<{ key: ApiKeyRecord; plaintext: string }> {
  if (input.mode !== 'live' && input.mode !== 'test') throw invalidArgument('mode must be live or test');
  const label = optionalText(input.label.trim(), 'label', 200);
  const generated = generateApiKey(input.mode);
  return deps.uow.write(async (tx) => {
    await requireOrgAccess(withinWrite(deps, tx), principal, 'manage', input.orgId);
    const key: ApiKeyRecord = {
      id: newId('key'), orgId: input.orgId, mode: input.mode!, prefix: generated.prefix, label,
      createdAt: deps.now(), revokedAt: null,
    };
    await tx.apiKeys.insert(key, generated.hash);
    return { key, plaintext: generated.plaintext };
  }, { alone: true });
}

const keyNotFound = () => new DomainError('not_found', 'API key not found', { code: 'api_key_not_found' });

/**
 * `Authorization: Bearer ak_…` → the organization's principal. Unknown and revoked keys get the
 * same answer so a caller cannot tell them apart; the key row is read on every request so
 * revocation is immediate.
 */
export async function authenticateApiKey(deps: AppDeps, header: string | null | undefined): Promise<ApiKeyPrincipal> {
  const token = bearerToken(header);
  if (!isApiKeyShaped(token)) throw unauthenticated('Malformed API key');
  const hash = hashSecret(token);
  const row = await deps.store.apiKeys.findByHash(hash);
  if (!row || !timingSafeEqual(row.hash, hash) || row.revokedAt !== null) throw unauthenticated('Invalid or revoked API key');
  return { kind: 'api_key', orgId: row.orgId, mode: row.mode, keyId: row.id };
}

/** Revokes a key; revoking twice is harmless and keeps the first revocation time. */
export function revokeApiKey(deps: AppDeps, principal: Principal, keyId: string): Promise<ApiKeyRecord> {
  return deps.uow.write(async (tx) => {
    // A malformed id is an unknown one: the same 404 as getAgent's, not a 400.
    const key = KEY_ID.test(keyId) ? await tx.apiKeys.get(keyId) : undefined;
    if (!key) throw keyNotFound();
    requireAccess(principal, 'manage', key.orgId, keyNotFound);
    await tx.apiKeys.revoke(keyId, deps.now());
    return (await tx.apiKeys.get(keyId))!;
  }, { alone: true });
}

export async function listApiKeys(deps: AppDeps, principal: Principal, orgId: string): Promise<ApiKeyRecord[]> {
  await requireOrgAccess(deps, principal, 'read', orgId);
  return deps.store.apiKeys.listByOrg(orgId);
}
