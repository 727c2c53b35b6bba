import { setImmediate } from 'node:timers/promises';
import { DomainError, invalidArgument } from '../../domain/errors.js';
import { recordBytes } from '../../domain/recordBytes.js';
import type { ApiKeyPrincipal, PaymentMethod, Principal, RegisteredService, ServiceEndpoint, ServiceRecord, ServiceSummary } from '../../domain/types.js';
import { SLUG, optionalText, requireName } from '../../domain/validate.js';
import { newUuid } from '../../store/ids.js';
import type { RegistryUsage } from '../../store/port.js';
import { requireAccess, requirePermission, type Permission } from '../access.js';
import type { AppDeps } from '../deps.js';
import { requireOrgAccess } from '../access.js';
import { withinWrite } from '../withinWrite.js';

const MAX_RESOLVE_SLUGS = 100;
const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

/**
 * Per-field bounds of a record, far above what a real service's record holds (a few dozen
 * endpoints, paths and URLs of well under 200 characters, a sentence or two of description);
 * the byte bounds below are what keep a record and an organization's registry small together.
 */
export const MAX_ENDPOINTS = 256;
export const MAX_ENDPOINT_PATH_CHARS = 512;
export const MAX_ENDPOINT_DESCRIPTION_CHARS = 1000;
export const MAX_URL_CHARS = 2048;

/**
 * Most stored bytes one record may take (domain/recordBytes.ts: its text fields and the JSON of
 * its payment methods and endpoints), shared or private. A real record is a few KiB; this keeps
 * what one resolve or one dashboard page reads of any record small.
 */
export const MAX_RECORD_BYTES = 64 * 1024;

/**
 * Most stored bytes of records one resolve answers: 4 records at their bound, dozens of real ones
 * (a real record is a few KiB). Past it the request is refused from the records' stored sizes,
 * before any is read, so no caller's resolve holds the event loop (reading, converting and writing
 * the records) for more than a few milliseconds.
 */
export const MAX_RESOLVE_BYTES = 256 * 1024;

function optionalUrl(value: string, field: string): string {
  const v = value.trim();
  if (v === '') return '';
  if (v.length > MAX_URL_CHARS) throw invalidArgument(`${field} must be at most ${MAX_URL_CHARS} characters`);
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw invalidArgument(`${field} must be an absolute http(s) URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalidArgument(`${field} must be an absolute http(s) URL`);
  if (url.username || url.password) throw invalidArgument(`${field} must not carry credentials`);
  return v;
}

/** Checks a registry record from an operator; the slug is its identity. */
export function normalizeService(input: ServiceRecord): ServiceRecord {
  const slug = input.slug.trim();
  if (!SLUG.test(slug)) throw invalidArgument('slug must be 1 to 64 lowercase letters, digits and dashes');
  // Allowlists tell addresses from slugs by the 0x prefix, so no slug may carry it.
  if (slug.startsWith('0x')) throw invalidArgument('slug must not start with 0x');
  if (input.paymentMethods.length > MAX_PAYMENT_METHODS) throw invalidArgument(`payment_methods must have at most ${MAX_PAYMENT_METHODS} entries`);
  if (input.endpoints.length > MAX_ENDPOINTS) throw invalidArgument(`endpoints must have at most ${MAX_ENDPOINTS} entries`);
  const paymentMethods: PaymentMethod[] = input.paymentMethods.map((m, i) => ({
    realm: optionalText(m.realm.trim(), `payment_methods[${i}].realm`, 255),
    baseUrl: optionalUrl(m.baseUrl, `payment_methods[${i}].base_url`),
    protocol: requireName(m.protocol, `payment_methods[${i}].protocol`, 32),
  }));
  const endpoints: ServiceEndpoint[] = input.endpoints.map((e, i) => {
    const method = e.method.trim().toUpperCase();
    if (!HTTP_METHODS.includes(method)) throw invalidArgument(`endpoints[${i}].method must be an HTTP method`);
    if (e.priceAtomic !== null && !/^\d{1,78}$/.test(e.priceAtomic)) {
      throw invalidArgument(`endpoints[${i}].price_atomic must be a non-negative integer string or unset`);
    }
    return {
      method,
      path: optionalText(e.path.trim(), `endpoints[${i}].path`, MAX_ENDPOINT_PATH_CHARS),
      description: optionalText(e.description, `endpoints[${i}].description`, MAX_ENDPOINT_DESCRIPTION_CHARS),
      priceAtomic: e.priceAtomic,
      currency: optionalText(e.currency.trim(), `endpoints[${i}].currency`, 32),
      pricingModel: optionalText(e.pricingModel.trim(), `endpoints[${i}].pricing_model`, 32),
      protocol: optionalText(e.protocol.trim(), `endpoints[${i}].protocol`, 32),
    };
  });
  const record: ServiceRecord = {
    id: input.id,
    slug,
    name: requireName(input.name, 'name'),
    description: optionalText(input.description, 'description', 2000),
    category: optionalText(input.category.trim(), 'category', 64),
    logoUrl: optionalUrl(input.logoUrl, 'logo_url'),
    docsUrl: optionalUrl(input.docsUrl, 'docs_url'),
    paymentMethods,
    endpoints,
  };
  const bytes = recordBytes(record);
  if (bytes > MAX_RECORD_BYTES) {
    throw invalidArgument(`a registry record may take at most ${MAX_RECORD_BYTES} bytes stored (this one would take ${bytes})`, 'registry_limit');
  }
  return record;
}

/**
 * Which part of the registry a write or a listing touches: the shared records (changed by the
 * operator alone: the use cases refuse anyone else) or one organization's private records (changed
 * by its owners and the operator).
 */
export type RegistryScope = 'shared' | { orgId: string };

function scopeOrg(scope: RegistryScope): string | null {
  return scope === 'shared' ? null : scope.orgId;
}

const notFound = () => new DomainError('not_found', 'Service not found', { code: 'service_not_found' });

/** The permission a scope needs: changing the shared records is the operator's alone. */
export function scopePermission(scope: RegistryScope, permission: Permission): Permission {
  return scope === 'shared' && permission !== 'read' ? 'operate' : permission;
}

/**
 * Checks that a principal may act on a scope: the shared records are the operator's to change,
 * an organization's private records its own members' (with `permission`) and the operator's.
 * Another organization's scope is the same 404 as an unknown organization.
 */
async function requireScopeAccess(deps: AppDeps, principal: Principal, permission: Permission, scope: RegistryScope): Promise<void> {
  if (scope === 'shared') requirePermission(principal, scopePermission(scope, permission));
  else await requireOrgAccess(deps, principal, permission, scope.orgId);
}

/**
 * Refuses a slug that would name two records in what some organization sees. A private slug may
 * not equal a shared one (it would shadow or be shadowed by the operator's record); a shared slug
 * may not equal any organization's private one, so adding a shared record never silently changes
 * which record an organization's allowlist slug names: the operator deletes the private records
 * first. Runs inside the write's transaction; the schema's triggers hold the same rule.
 */
async function requireSlugFree(deps: AppDeps, scope: RegistryScope, slug: string): Promise<void> {
  if (scope !== 'shared') {
    if (await deps.store.services.get(slug, null)) {
      throw new DomainError('conflict', `slug ${slug} is a shared registry service; choose another slug for a private record`, { code: 'service_slug_shared' });
    }
    return;
  }
  const holders = await deps.store.services.privateHolders(slug);
  if (holders.length > 0) {
    const shown = holders.slice(0, 5).join(', ') + (holders.length > 5 ? ` and ${holders.length - 5} more` : '');
    throw new DomainError('conflict', `slug ${slug} is held by private records of ${shown}; delete those first`, { code: 'service_slug_private' });
  }
}

/**
 * Most private registry records one organization may hold. Every quote and sign of the
 * organization's agents is attributed against its records, and each registry write is one
 * transaction in the single write queue: the bounds keep both small, whatever one tenant imports.
 */
export const MAX_PRIVATE_RECORDS = 1000;
/** Most base URLs (payment methods with a base URL) one organization's private records may hold together. */
export const MAX_PRIVATE_BASE_URLS = 10_000;
/** Most payment methods, so base URLs, one record may carry. */
export const MAX_PAYMENT_METHODS = 20;
/**
 * Most stored bytes (domain/recordBytes.ts) one organization's private records may take together:
 * a thousand records of 4 KiB, far more than a real private registry holds, and small enough that
 * what one organization stores, lists and resolves never weighs on another's requests.
 */
export const MAX_PRIVATE_BYTES = 4 * 1024 * 1024;

/** What an organization holds before a write, for requireRegistryRoom; null for the shared records, which have no bounds. */
export async function registryUsageBefore(deps: AppDeps, scope: RegistryScope): Promise<RegistryUsage | null> {
  return scope === 'shared' ? null : deps.store.services.usage(scope.orgId);
}

/**
 * Refuses a write that leaves an organization's private records over their bounds; called inside
 * the write after its changes, so the whole write (an import too) rolls back and nothing is kept,
 * and, being in the write's transaction, two concurrent writes cannot both pass on either store
 * (SQLite's single writer; PostgreSQL's serializable transactions, across replicas). A write
 * that leaves an organization no further past a bound than `before` (what it held before the
 * write) is let through: an organization past a bound set after it filled its registry can still
 * shrink and replace its records, not only delete them. The shared records are the operator's
 * and have no such bound.
 */
export async function requireRegistryRoom(deps: AppDeps, scope: RegistryScope, before: RegistryUsage | null = null): Promise<void> {
  if (scope === 'shared') return;
  const after = await deps.store.services.usage(scope.orgId);
  const past = (key: keyof RegistryUsage, max: number) => after[key] > max && after[key] > (before?.[key] ?? 0);
  if (past('records', MAX_PRIVATE_RECORDS)) {
    throw invalidArgument(`an organization may hold at most ${MAX_PRIVATE_RECORDS} private registry records (this change would make ${after.records})`, 'registry_limit');
  }
  if (past('baseUrls', MAX_PRIVATE_BASE_URLS)) {
    throw invalidArgument(`an organization's private registry records may hold at most ${MAX_PRIVATE_BASE_URLS} base URLs together (this change would make ${after.baseUrls})`, 'registry_limit');
  }
  if (past('bytes', MAX_PRIVATE_BYTES)) {
    throw invalidArgument(`an organization's private registry records may take at most ${MAX_PRIVATE_BYTES} bytes stored together (this change would make ${after.bytes})`, 'registry_limit');
  }
}

/** Creates or replaces a record by slug within one scope; an existing record keeps its id. */
export async function upsertService(deps: AppDeps, principal: Principal, scope: RegistryScope, input: ServiceRecord): Promise<RegisteredService> {
  // Permission before validation; the scope (and that its organization exists) inside the write.
  requirePermission(principal, scopePermission(scope, 'manage'));
  const record = normalizeService(input);
  return deps.uow.write(async (tx) => {
    const inTx = withinWrite(deps, tx);
    const before = await registryUsageBefore(inTx, scope);
    const saved = await saveService(inTx, principal, scope, record);
    await requireRegistryRoom(inTx, scope, before);
    return saved;
  }, { alone: true });
}

/**
 * Creates or replaces a normalized record inside the caller's write, without the scope's bounds:
 * for a caller that saves many and then checks requireRegistryRoom once (serviceImport.ts).
 */
export async function saveService(inTx: AppDeps, principal: Principal, scope: RegistryScope, record: ServiceRecord): Promise<RegisteredService> {
  await requireScopeAccess(inTx, principal, 'manage', scope);
  await requireSlugFree(inTx, scope, record.slug);
  return inTx.store.services.upsert({ ...record, id: newUuid() }, scopeOrg(scope), inTx.now());
}

/**
 * Deletes a record of one scope. An organization asking to delete a shared record is told the
 * operator owns it; another organization's private record is simply not found, like an unknown slug.
 */
export async function deleteService(deps: AppDeps, principal: Principal, scope: RegistryScope, slug: string): Promise<void> {
  // Another organization's record is simply not found, like an unknown slug of an unknown organization.
  if (scope === 'shared') requirePermission(principal, 'operate');
  else requireAccess(principal, 'manage', scope.orgId, notFound);
  const s = slug.trim();
  await deps.uow.write(async (tx) => {
    if (await tx.services.delete(s, scopeOrg(scope))) return;
    if (scope !== 'shared' && await tx.services.get(s, null)) throw sharedReadOnly(s);
    throw notFound();
  }, { alone: true });
}

/** The refusal an organization gets for a shared record: it exists for everyone, so it is named. */
function sharedReadOnly(slug: string): DomainError {
  return new DomainError('failed_precondition', `service ${slug} is in the shared registry; only the operator can change it`, { code: 'service_shared' });
}

/** What listings show of the records of one scope, by slug (their summaries: no descriptions, no endpoints). */
export async function listServices(deps: AppDeps, principal: Principal, scope: RegistryScope): Promise<readonly ServiceSummary[]> {
  await requireScopeAccess(deps, principal, 'read', scope);
  return deps.store.services.summaries(scopeOrg(scope));
}

/** Most stored bytes of whole records one page of a listing carries (at least one record, whatever its size). */
export const MAX_LIST_PAGE_BYTES = 1024 * 1024;

/** How many of the leading summaries' records fit in `budget` stored bytes together, one at least. */
export function recordsWithin(summaries: readonly ServiceSummary[], budget: number): number {
  let bytes = 0;
  for (const [i, s] of summaries.entries()) {
    bytes += s.bytes;
    if (bytes > budget) return Math.max(i, 1);
  }
  return summaries.length;
}

/**
 * The whole records of one scope that `page` (a run of listServices, in its order) names, by slug;
 * one changed or deleted since the listing is as it is now, or missing.
 */
export async function serviceRecords(deps: AppDeps, principal: Principal, scope: RegistryScope, page: readonly ServiceSummary[]): Promise<RegisteredService[]> {
  await requireScopeAccess(deps, principal, 'read', scope);
  if (page.length === 0) return [];
  const slugs = new Set(page.map((s) => s.slug));
  const records = await deps.store.services.range(scopeOrg(scope), page[0]!.slug, page[page.length - 1]!.slug);
  return records.filter((r) => slugs.has(r.slug));
}

/** What an organization sees, summarized: the shared records, then its own private ones, each by slug. */
export async function visibleServices(deps: AppDeps, principal: Principal, orgId: string): Promise<readonly ServiceSummary[]> {
  await requireOrgAccess(deps, principal, 'read', orgId);
  return deps.store.services.visibleSummaries(orgId);
}

/** The record a slug names for an organization: shared, or its own private one; never another's. */
export async function findVisibleService(deps: AppDeps, principal: Principal, orgId: string, slug: string): Promise<RegisteredService | undefined> {
  requireAccess(principal, 'read', orgId, notFound);
  return visibleRecord(deps, orgId, slug);
}

async function visibleRecord(deps: AppDeps, orgId: string, slug: string): Promise<RegisteredService | undefined> {
  if (!SLUG.test(slug)) return undefined;
  return (await deps.store.services.get(slug, null)) ?? (await deps.store.services.get(slug, orgId));
}

export type ResolveResult = {
  results: Array<{ slug: string; service: ServiceRecord | null }>;
  resolvedCount: number;
  unresolvedCount: number;
};

/**
 * Looks up slugs for an organization's key: shared records and the organization's own private
 * ones (its agents are attributed against both), never another organization's. Each input may
 * itself be a comma-separated list; blanks are dropped, duplicates collapse to one entry, and a
 * slug that is not registered (or not even slug-shaped) maps to null. Slugs whose records take
 * more than MAX_RESOLVE_BYTES together are refused (resolve_too_large) from their stored sizes,
 * before any record is read.
 */
export async function resolveServices(deps: AppDeps, principal: ApiKeyPrincipal, inputs: string[]): Promise<ResolveResult> {
  const slugs: string[] = [];
  for (const input of inputs) {
    for (const part of input.split(',')) {
      const slug = part.trim();
      if (slug !== '' && !slugs.includes(slug)) slugs.push(slug);
    }
  }
  if (slugs.length === 0) throw invalidArgument('slug or slugs query parameter is required', 'slug_required');
  if (slugs.length > MAX_RESOLVE_SLUGS) throw invalidArgument(`at most ${MAX_RESOLVE_SLUGS} slugs per request`, 'too_many_slugs');
  const bytes = await deps.store.services.visibleBytes(principal.orgId, slugs.filter((slug) => SLUG.test(slug)));
  if (bytes > MAX_RESOLVE_BYTES) {
    throw invalidArgument(`the records of these slugs take ${bytes} bytes together, more than the ${MAX_RESOLVE_BYTES} one resolve answers; ask for fewer slugs at a time`, 'resolve_too_large');
  }
  const results: ResolveResult['results'] = [];
  for (const slug of slugs) {
    const service = (await visibleRecord(deps, principal.orgId, slug)) ?? null;
    // SQLite reads synchronously: between records, other requests get their turn, so a resolve
    // of many large records is many short steps on the event loop rather than one long one.
    if (service) await setImmediate();
    results.push({ slug, service });
  }
  const resolvedCount = results.filter((r) => r.service !== null).length;
  return { results, resolvedCount, unresolvedCount: results.length - resolvedCount };
}
