import type { SessionContext } from '../app/accounts/dashboardSessions.js';
import { html, type Html, type Renderable } from './html.js';

/** A one-time message shown on the page after a redirect; `secret` is a just-created API key. */
export type Flash = { kind: 'ok' | 'error'; text: string; secret?: string; warnings?: readonly string[] };

/** What every signed-in page knows besides its own data. */
export type PageContext = {
  session: SessionContext;
  orgName: string;
  now: number;
  pendingCount: number;
  flash: Flash | undefined;
  /** Version suffix for static files, so a new build is never served from a stale cache. */
  assetVersion: string;
};

const NAV = [
  ['approvals', 'Approvals'],
  ['agents', 'Agents'],
  ['spend', 'Spend'],
  ['transactions', 'Transactions'],
  ['keys', 'API keys'],
  ['services', 'Services'],
  ['users', 'Users'],
] as const;

export type Section = (typeof NAV)[number][0];

/** The hidden field every state-changing form carries. */
export function csrfField(ctx: { session: SessionContext }): Html {
  return html`<input type="hidden" name="_csrf" value="${ctx.session.csrfToken}">`;
}

function head(title: string, assetVersion: string, now: number): Html {
  return html`<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="server-now" content="${now}">
<title>${title} · paypolicy</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard/static/dashboard.css?v=${assetVersion}">
<script src="/dashboard/static/dashboard.js?v=${assetVersion}" defer></script>
</head>`;
}

function flashBlock(flash: Flash | undefined): Renderable {
  if (!flash) return '';
  return html`<div class="flash flash-${flash.kind}" role="${flash.kind === 'error' ? 'alert' : 'status'}">
<p>${flash.text}</p>
${flash.warnings?.length ? html`<p><strong>Check:</strong></p><ul class="flash-warnings">${flash.warnings.map((w) => html`<li>${w}</li>`)}</ul>` : ''}
${flash.secret !== undefined && html`<div class="secret">
<label class="sr-only" for="new-secret">New API key</label>
<input id="new-secret" type="text" readonly value="${flash.secret}" autocomplete="off" spellcheck="false">
<button type="button" data-copy="new-secret">Copy</button>
</div>
<p class="small">This is the only time the key is shown. Store it in your agent's secret store now.</p>`}
</div>`;
}

/** A signed-in page: top bar with navigation, who is signed in, the flash, then the content. */
export function page(ctx: PageContext, section: Section | undefined, title: string, content: Renderable): Html {
  const { user } = ctx.session;
  const nav = NAV.map(([id, label]) => {
    const badge = id === 'approvals'
      ? html`<span class="count" data-pending-count ${ctx.pendingCount === 0 ? html`hidden` : ''}>${ctx.pendingCount}</span><span class="sr-only"> pending</span>`
      : '';
    return html`<a href="/dashboard/${id}" ${section === id ? html`aria-current="page"` : ''}>${label}${badge}</a>`;
  });
  return html`<html lang="en">
${head(title, ctx.assetVersion, ctx.now)}
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="topbar"><div class="topbar-inner">
<a class="brand" href="/dashboard">paypolicy<span>${ctx.orgName}</span></a>
<nav class="nav" aria-label="Sections">${nav}</nav>
<div class="who"><span><span class="who-email">${user.email} · </span>${user.role}</span>
<form method="post" action="/dashboard/sign-out">${csrfField(ctx)}<button type="submit">Sign out</button></form></div>
</div></header>
<main id="main" tabindex="-1">
${flashBlock(ctx.flash)}
${content}
</main>
</body>
</html>`;
}

/** A page for someone not signed in (sign-in, errors before a session exists). */
export function barePage(title: string, assetVersion: string, now: number, content: Renderable): Html {
  return html`<html lang="en">
${head(title, assetVersion, now)}
<body>
<main id="main">
${content}
</main>
</body>
</html>`;
}

/**
 * A table in a box that scrolls sideways when the table is wider than the screen. The box is a
 * named region that takes keyboard focus, so keyboard users can scroll it and screen readers
 * announce what it holds; it is also the containing block of the table's screen-reader-only text,
 * which therefore cannot widen the page. `className` adds classes to the box.
 */
export function tableWrap(label: string, table: Renderable, className = ''): Html {
  return html`<div class="table-wrap${className === '' ? '' : ` ${className}`}" role="region" tabindex="0" aria-label="${label}">${table}</div>`;
}

/**
 * What is wrong with a submitted form, above it: one link per field error, to the field. It has
 * role=alert and the dashboard script moves focus to it when the page loads, so keyboard and
 * screen-reader users start at the problem instead of the top of the page.
 */
export function errorSummary(errors: ReadonlyArray<readonly [fieldId: string, message: string | undefined]>): Renderable {
  const shown = errors.filter((e): e is readonly [string, string] => e[1] !== undefined);
  if (shown.length === 0) return '';
  return html`<div class="error-summary" role="alert" tabindex="-1" data-error-summary>
<h2>${shown.length === 1 ? 'The form has a problem' : `The form has ${shown.length} problems`}</h2>
<ul>${shown.map(([id, message]) => html`<li><a href="#${id}">${message}</a></li>`)}</ul>
</div>`;
}

/** A form field's error, tied to its input by id for screen readers. */
export function fieldError(id: string, message: string | undefined): Renderable {
  return message === undefined ? '' : html`<p class="field-error" id="${id}-error">${message}</p>`;
}

/** Attributes that mark an input invalid and point at its message. */
export function invalidAttrs(id: string, message: string | undefined): Renderable {
  return message === undefined ? '' : html`aria-invalid="true" aria-describedby="${id}-error"`;
}
