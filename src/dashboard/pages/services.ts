import { roleAllows } from '../../app/dashboardRoles.js';
import { JsonDuplicateKeyError, parseJson } from '../../http/parseJson.js';
import { deleteService, findVisibleService, upsertService, visibleServices, type RegistryScope } from '../../app/registry/registry.js';
import { importServices } from '../../app/registry/serviceImport.js';
import { DomainError, invalidArgument } from '../../domain/errors.js';
import type { RegisteredService, ServiceRecord, ServiceSummary } from '../../domain/types.js';
import { html, safeHref, type Html } from '../html.js';
import { csrfField, errorSummary, fieldError, invalidAttrs, tableWrap } from '../layout.js';
import { errorText, type Reply, type Route, type RouteContext } from '../routes.js';
import { endpointFromWireJson, endpointsToWireJson, serviceFromWireJson } from '../../domain/serviceRecordJson.js';

/** Largest import the dashboard accepts, as uploaded file or pasted text. */
export const MAX_IMPORT_BYTES = 1024 * 1024;

async function registered(ctx: RouteContext, slug: string): Promise<RegisteredService | undefined> {
  return await findVisibleService(ctx.deps, ctx.principal, ctx.principal.orgId, slug);
}

/** Every write from the dashboard goes to the user's organization's private records, never the shared ones. */
function ownScope(ctx: RouteContext): RegistryScope {
  return { orgId: ctx.principal.orgId };
}

function scopeLabel(s: Pick<ServiceSummary, 'orgId'>): Html {
  return s.orgId === null ? html`<span class="muted">shared</span>` : html`private`;
}

async function servicesPage(ctx: RouteContext, importError?: { text: string; status: number; pasted: string }): Promise<Reply> {
  const { deps, session } = ctx;
  const services = await visibleServices(deps, ctx.principal, ctx.principal.orgId);
  const manage = roleAllows(session.user.role, 'manage');
  const rows = services.map((s) => html`<tr>
<td><a href="/dashboard/services/${s.slug}"><code>${s.slug}</code></a></td>
<td>${s.name}${s.docsUrl !== '' && html` <a class="small" href="${safeHref(s.docsUrl)}" rel="noopener noreferrer">docs</a>`}</td>
<td>${s.category}</td>
<td>${scopeLabel(s)}</td>
<td>${s.paymentMethods.map((m) => m.protocol).join(', ')}</td>
<td class="num">${s.endpointCount}</td>
</tr>`);
  const tools = manage
    ? html`<section class="panel" aria-labelledby="import-heading"><h2 id="import-heading">Import</h2>
<p class="small muted">A JSON array of records in the shape <code>/api/resolve</code> returns. Records become private to this organization and are added or replaced by slug; one invalid record, or one naming a shared slug, rejects the whole import.</p>
${errorSummary([['import-json', importError?.text]])}
<form method="post" action="/dashboard/services/import" enctype="multipart/form-data">${csrfField({ session })}
<div class="form-grid">
<div class="field"><label for="import-file">JSON file</label><input type="file" id="import-file" name="file" accept="application/json,.json"></div>
<div class="field"><label for="import-json">or paste JSON</label><textarea id="import-json" name="json" rows="4" spellcheck="false" ${invalidAttrs('import-json', importError?.text)}>${importError?.pasted ?? ''}</textarea>
${fieldError('import-json', importError?.text)}</div>
</div>
<button type="submit" class="primary">Import</button>
</form></section>`
    : '';
  return {
    type: 'page',
    status: importError?.status ?? 200,
    section: 'services',
    title: 'Services',
    content: html`<div class="page-head"><h1>Services registry</h1>${manage && html`<a class="button primary" href="/dashboard/services/new">Add a private service</a>`}</div>
<p class="muted">Paid APIs agents may pay, by slug. Allowlists may name a slug instead of an address. Shared records come from the server's operator, are seen by every organization and are read-only here. Private records belong to this organization: only its agents are attributed to them, and a private slug may not equal a shared one. When a URL lies under the base URLs of two records, the shared record wins.</p>
${services.length === 0 ? html`<p class="empty">The registry is empty.</p>` : tableWrap('Registered services', html`<table>
<caption class="sr-only">Registered services</caption>
<thead><tr><th scope="col">Slug</th><th scope="col">Name</th><th scope="col">Category</th><th scope="col">Scope</th><th scope="col">Payment</th><th scope="col" class="num">Endpoints</th></tr></thead>
<tbody>${rows}</tbody></table>`)}
${tools}`,
  };
}

type ServiceForm = {
  slug: string; name: string; description: string; category: string; logoUrl: string; docsUrl: string; methods: string; endpoints: string;
};
type FieldKey = keyof ServiceForm;

function formFromRecord(s: ServiceRecord): ServiceForm {
  return {
    slug: s.slug, name: s.name, description: s.description, category: s.category, logoUrl: s.logoUrl, docsUrl: s.docsUrl,
    methods: s.paymentMethods.map((m) => [m.protocol, m.baseUrl, m.realm].filter((x) => x !== '').join(' ')).join('\n'),
    endpoints: endpointsToWireJson(s.endpoints),
  };
}

/** `protocol base-url [realm]` per line → payment methods. */
function parseMethods(text: string): ServiceRecord['paymentMethods'] {
  return text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '').map((line, i) => {
    const [protocol, baseUrl, ...realm] = line.split(/\s+/);
    if (!protocol || !baseUrl) throw invalidArgument(`payment_methods line ${i + 1} must be: protocol base-URL [realm]`);
    return { protocol, baseUrl, realm: realm.join(' ') };
  });
}

function parseEndpoints(text: string): ServiceRecord['endpoints'] {
  if (text.trim() === '') return [];
  let value: unknown;
  try {
    value = parseJson(text);
  } catch (e) {
    if (e instanceof JsonDuplicateKeyError) throw invalidArgument(`endpoints has a duplicate key "${e.key}"`);
    throw invalidArgument('endpoints must be a JSON array of endpoint objects');
  }
  if (!Array.isArray(value)) throw invalidArgument('endpoints must be a JSON array of endpoint objects');
  return value.map((e, i) => endpointFromWireJson(e, `endpoints[${i}]`));
}

/** Which field a validation message is about: upsertService names the field first. */
function fieldOf(message: string): FieldKey | undefined {
  const first = /^[a-z_]+/.exec(message)?.[0];
  const map: Record<string, FieldKey> = {
    slug: 'slug', name: 'name', description: 'description', category: 'category', logo_url: 'logoUrl', docs_url: 'docsUrl',
    payment_methods: 'methods', endpoints: 'endpoints',
  };
  return first === undefined ? undefined : map[first];
}

/** Each form field's input id, for the error summary's links. */
const FIELD_IDS: Record<FieldKey, string> = {
  slug: 'svc-slug', name: 'svc-name', description: 'svc-description', category: 'svc-category', logoUrl: 'svc-logo', docsUrl: 'svc-docs',
  methods: 'svc-methods', endpoints: 'svc-endpoints',
};

function serviceFormPage(ctx: RouteContext, mode: 'new' | 'edit', v: ServiceForm, error?: { field: FieldKey | undefined; text: string; status?: number }): Reply {
  const { session } = ctx;
  const err = (k: FieldKey) => (error?.field === k ? error.text : undefined);
  const input = (k: FieldKey, id: string, label: Html | string, type = 'text', extra: Html | string = '') => html`<div class="field"><label for="${id}">${label}</label>
<input type="${type}" id="${id}" name="${k}" value="${v[k]}" ${extra} ${invalidAttrs(id, err(k))}>${fieldError(id, err(k))}</div>`;
  const slugExtra = mode === 'edit' ? html`readonly aria-readonly="true"` : html`required maxlength="64" pattern="[a-z0-9-]+"`;
  return {
    type: 'page',
    status: error ? error.status ?? 400 : 200,
    section: 'services',
    title: mode === 'new' ? 'Add a service' : `Edit ${v.slug}`,
    content: html`<p class="small"><a href="/dashboard/services">← Services registry</a></p>
<h1>${mode === 'new' ? 'Add a service' : html`Edit <code>${v.slug}</code>`}</h1>
<p class="muted">This record is private to your organization: only its agents are attributed to it.</p>
${error && (error.field === undefined
    ? html`<div class="error-summary" role="alert" tabindex="-1" data-error-summary><p>${error.text}</p></div>`
    : errorSummary([[FIELD_IDS[error.field], error.text]]))}
<form class="panel" method="post" action="/dashboard/services" novalidate>${csrfField({ session })}
<input type="hidden" name="mode" value="${mode}">
<div class="form-grid">
${input('slug', 'svc-slug', html`Slug <span class="hint">lowercase letters, digits, dashes</span>`, 'text', slugExtra)}
${input('name', 'svc-name', 'Name', 'text', html`required maxlength="200"`)}
${input('category', 'svc-category', 'Category', 'text', html`maxlength="64"`)}
</div>
<div class="field"><label for="svc-description">Description</label>
<textarea id="svc-description" name="description" rows="3" ${invalidAttrs('svc-description', err('description'))}>${v.description}</textarea>${fieldError('svc-description', err('description'))}</div>
<div class="form-grid">
${input('docsUrl', 'svc-docs', 'Documentation URL', 'url')}
${input('logoUrl', 'svc-logo', 'Logo URL', 'url')}
</div>
<div class="field"><label for="svc-methods">Payment methods <span class="hint">one per line: protocol base-URL [realm], e.g. <code>x402 https://api.example.com</code></span></label>
<textarea id="svc-methods" name="methods" rows="3" spellcheck="false" ${invalidAttrs('svc-methods', err('methods'))}>${v.methods}</textarea>${fieldError('svc-methods', err('methods'))}</div>
<div class="field"><label for="svc-endpoints">Endpoints <span class="hint">JSON array in the /api/resolve shape; empty for none</span></label>
<textarea id="svc-endpoints" name="endpoints" rows="6" spellcheck="false" ${invalidAttrs('svc-endpoints', err('endpoints'))}>${v.endpoints}</textarea>${fieldError('svc-endpoints', err('endpoints'))}</div>
<button type="submit" class="primary">Save service</button>
</form>
${mode === 'edit' && html`<form method="post" action="/dashboard/services/${v.slug}/delete" data-confirm="Delete the service ${v.slug}? Allowlists naming this slug stop matching it.">${csrfField({ session })}<button type="submit" class="danger">Delete service</button></form>`}`,
  };
}

function serviceView(s: RegisteredService): Reply {
  return {
    type: 'page',
    section: 'services',
    title: s.name,
    content: html`<p class="small"><a href="/dashboard/services">← Services registry</a></p>
<h1>${s.name} <code class="small">${s.slug}</code></h1>
<section class="panel"><dl class="facts">
<dt>Scope</dt><dd>${s.orgId === null ? 'shared: managed by the server\'s operator, seen by every organization' : 'private to your organization'}</dd>
<dt>Description</dt><dd>${s.description}</dd>
<dt>Category</dt><dd>${s.category}</dd>
<dt>Documentation</dt><dd>${s.docsUrl !== '' && html`<a href="${safeHref(s.docsUrl)}" rel="noopener noreferrer">${s.docsUrl}</a>`}</dd>
<dt>Payment methods</dt><dd>${s.paymentMethods.map((m) => html`${m.protocol} <code>${m.baseUrl}</code> ${m.realm}<br>`)}</dd>
<dt>Endpoints</dt><dd>${s.endpoints.map((e) => html`<code>${e.method} ${e.path}</code> ${e.priceAtomic === null ? 'dynamic price' : `${e.priceAtomic} ${e.currency}`}<br>`)}</dd>
</dl></section>`,
  };
}

function readServiceForm(ctx: RouteContext): ServiceForm {
  const f = ctx.form;
  return {
    slug: f.get('slug'), name: f.get('name'), description: f.get('description'), category: f.get('category'),
    logoUrl: f.get('logoUrl'), docsUrl: f.get('docsUrl'), methods: f.get('methods'), endpoints: f.get('endpoints'),
  };
}

/**
 * The import's JSON: the chosen file or the pasted text, never both (one would be dropped
 * unseen), and no file under another part name (it would be ignored).
 */
function importText(ctx: RouteContext): string {
  for (const name of ctx.files.keys()) if (name !== 'file') throw invalidArgument(`Unknown form field "${name.slice(0, 64)}"`);
  const file = ctx.files.get('file');
  const pasted = ctx.form.get('json');
  const chosen = file !== undefined && file.length > 0;
  if (chosen && pasted.trim() !== '') throw invalidArgument('choose a JSON file or paste JSON, not both');
  return chosen ? file.toString('utf8') : pasted;
}

/**
 * The service registry: every organization lists and views the shared records and its own private
 * ones; owners add, edit, delete and import private records only. The use cases take the
 * organization's scope, so no form field can reach a shared record or another organization's.
 */
export const serviceRoutes: Route[] = [
  { method: 'GET', path: '/dashboard/services', permission: 'read', handle: async (ctx) => servicesPage(ctx) },
  {
    method: 'GET',
    path: '/dashboard/services/new',
    permission: 'manage',
    handle: async (ctx) => serviceFormPage(ctx, 'new', { slug: '', name: '', description: '', category: '', logoUrl: '', docsUrl: '', methods: '', endpoints: '' }),
  },
  {
    method: 'GET',
    path: '/dashboard/services/{slug}',
    permission: 'read',
    async handle(ctx) {
      const s = await registered(ctx, ctx.params.slug!);
      if (!s) throw new DomainError('not_found', 'Service not found', { code: 'service_not_found' });
      // Shared records are the operator's: every organization sees them read-only.
      return s.orgId !== null && roleAllows(ctx.session.user.role, 'manage') ? serviceFormPage(ctx, 'edit', formFromRecord(s)) : serviceView(s);
    },
  },
  {
    method: 'POST',
    path: '/dashboard/services',
    permission: 'manage',
    body: 'form',
    fields: ['slug', 'name', 'description', 'category', 'logoUrl', 'docsUrl', 'methods', 'endpoints', 'mode'],
    async handle(ctx) {
      const v = readServiceForm(ctx);
      const mode = ctx.form.get('mode') === 'edit' ? 'edit' : 'new';
      try {
        // A shared slug is refused by upsertService (conflict, shown below); this is about our own records.
        const existing = v.slug.trim() === '' ? undefined : await registered(ctx, v.slug.trim());
        if (mode === 'new' && existing && existing.orgId !== null) {
          // A new-service form must not silently replace an existing record with the same slug.
          return serviceFormPage(ctx, mode, v, { field: 'slug', text: 'slug is already registered; edit that service instead' });
        }
        let methods: ServiceRecord['paymentMethods'];
        let endpoints: ServiceRecord['endpoints'];
        try {
          methods = parseMethods(v.methods);
        } catch (err) {
          return serviceFormPage(ctx, mode, v, { field: 'methods', text: errorText(err).text });
        }
        try {
          endpoints = parseEndpoints(v.endpoints);
        } catch (err) {
          return serviceFormPage(ctx, mode, v, { field: 'endpoints', text: errorText(err).text });
        }
        const saved = await upsertService(ctx.deps, ctx.principal, ownScope(ctx), {
          id: '', slug: v.slug, name: v.name, description: v.description, category: v.category, logoUrl: v.logoUrl, docsUrl: v.docsUrl,
          paymentMethods: methods, endpoints,
        });
        return { type: 'redirect', to: '/dashboard/services', flash: { kind: 'ok', text: `Service ${saved.slug} saved.` } };
      } catch (err) {
        const e = errorText(err);
        if (e.kind === 'conflict') return serviceFormPage(ctx, mode, v, { field: 'slug', text: e.text, status: e.status });
        if (e.kind !== 'invalid_argument') throw err;
        return serviceFormPage(ctx, mode, v, { field: fieldOf(e.text), text: e.text });
      }
    },
  },
  {
    method: 'POST',
    path: '/dashboard/services/import',
    permission: 'manage',
    body: 'multipart',
    fields: ['json'],
    async handle(ctx) {
      const pasted = ctx.form.get('json');
      try {
        const text = importText(ctx);
        if (text.trim() === '') throw invalidArgument('choose a JSON file or paste JSON');
        let value: unknown;
        try {
          value = parseJson(text);
        } catch (e) {
          if (e instanceof JsonDuplicateKeyError) throw invalidArgument(`the import has a duplicate key "${e.key}"`);
          throw invalidArgument('the import is not valid JSON');
        }
        const list = Array.isArray(value) ? value : [value];
        const saved = await importServices(ctx.deps, ctx.principal, ownScope(ctx), list.map((r, i) => serviceFromWireJson(r, `record ${i + 1}`)));
        return { type: 'redirect', to: '/dashboard/services', flash: { kind: 'ok', text: `Imported ${saved.length} ${saved.length === 1 ? 'service' : 'services'}.` } };
      } catch (err) {
        const e = errorText(err);
        if (e.kind !== 'invalid_argument' && e.kind !== 'conflict') throw err;
        return servicesPage(ctx, { text: e.text, status: e.status, pasted: pasted.length <= 64 * 1024 ? pasted : '' });
      }
    },
  },
  {
    method: 'POST',
    path: '/dashboard/services/{slug}/delete',
    permission: 'manage',
    body: 'form',
    async handle(ctx) {
      await deleteService(ctx.deps, ctx.principal, ownScope(ctx), ctx.params.slug!);
      return { type: 'redirect', to: '/dashboard/services', flash: { kind: 'ok', text: `Service ${ctx.params.slug!} deleted.` } };
    },
  },
];
