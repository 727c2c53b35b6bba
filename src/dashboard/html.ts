/**
 * HTML built from tagged templates where every interpolated value is escaped unless it is already
 * Html. Templates quote every attribute value with double quotes, and escapeHtml also escapes both
 * quote characters, so the same escaping is safe in text and in attribute values.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export type Renderable = Html | string | number | bigint | boolean | null | undefined | readonly Renderable[];

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML text content and double- or single-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

function render(value: Renderable): string {
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  // `cond && html\`…\`` leaves false behind when cond fails: it renders as nothing.
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

/** The template tag: literal parts are trusted markup, interpolations are escaped. */
export function html(strings: TemplateStringsArray, ...values: Renderable[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new Html(out);
}

/**
 * Marks text as markup without escaping. Only for text this code produced itself from numbers
 * and constants (SVG coordinates); never for anything a user or the database supplied.
 */
export function trusted(markup: string): Html {
  return new Html(markup);
}

/** A link target for a URL from the database: http(s) only, anything else becomes inert. */
export function safeHref(url: string): string {
  return /^https?:\/\//i.test(url) ? url : '#';
}
