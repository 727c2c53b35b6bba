import { DomainError, invalidArgument, toDomainError } from '../../domain/errors.js';
import type { Principal, RegisteredService, ServiceRecord } from '../../domain/types.js';
import type { AppDeps } from '../deps.js';
import { requirePermission } from '../access.js';
import { normalizeService, registryUsageBefore, requireRegistryRoom, saveService, scopePermission, type RegistryScope } from './registry.js';
import { withinWrite } from '../withinWrite.js';

/** Most records one import may carry; a registry is small, and the whole import is one transaction. */
export const MAX_IMPORT_RECORDS = 1000;

/**
 * Upserts many registry records into one scope all-or-nothing: each is checked and saved as
 * upsertService does, in this one transaction, and the first invalid or refused record (a private
 * import naming a shared slug, say) rolls back the whole import, with its position and slug in the
 * message. The organization's registry bounds (registry.ts: records, base URLs, stored bytes) are
 * checked once, on the result: an import that would leave them exceeded writes nothing.
 */
export async function importServices(deps: AppDeps, principal: Principal, scope: RegistryScope, records: readonly ServiceRecord[]): Promise<RegisteredService[]> {
  requirePermission(principal, scopePermission(scope, 'manage'));
  if (records.length === 0) throw invalidArgument('the import holds no records');
  if (records.length > MAX_IMPORT_RECORDS) throw invalidArgument(`an import may hold at most ${MAX_IMPORT_RECORDS} records`);
  // A slug twice in one import would keep only its last record while reporting both imported.
  const seen = new Map<string, number>();
  for (const [i, record] of records.entries()) {
    const slug = typeof record.slug === 'string' ? record.slug.trim().toLowerCase() : '';
    const first = seen.get(slug);
    if (slug !== '' && first !== undefined) throw invalidArgument(`record ${i + 1} (${slug.slice(0, 64)}): the slug of record ${first + 1} again; an import holds each slug once`, 'duplicate_slug');
    seen.set(slug, i);
  }
  return deps.uow.write(async (tx) => {
    const inTx = withinWrite(deps, tx);
    const before = await registryUsageBefore(inTx, scope);
    const done: RegisteredService[] = [];
    for (const [i, record] of records.entries()) {
      try {
        done.push(await saveService(inTx, principal, scope, normalizeService(record)));
      } catch (err) {
        const e = toDomainError(err);
        if (e.kind !== 'invalid_argument' && e.kind !== 'conflict') throw e;
        const slug = record.slug ? ` (${record.slug.slice(0, 64)})` : '';
        throw new DomainError(e.kind, `record ${i + 1}${slug}: ${e.shortMessage}`, { code: e.code, cause: e });
      }
    }
    await requireRegistryRoom(inTx, scope, before);
    return done;
  }, { alone: true });
}
