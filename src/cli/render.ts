import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';

/**
 * Server data is shown on a terminal: control characters (escape sequences, newlines) become `?`
 * so a stored name or description cannot rewrite the screen or break the columns.
 */
export function clean(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
}

/** A timestamp as ISO 8601 to the second, or `-` when unset. */
export function formatTime(ts: Timestamp | undefined): string {
  return ts ? timestampDate(ts).toISOString().replace(/\.\d{3}Z$/, 'Z') : '-';
}

/** A USD decimal string as the server gave it, with a dollar sign. */
export function formatUsdText(amount: string): string {
  return `$${amount || '0'}`;
}

/** Left-aligned columns two spaces apart; the last column is not padded. Cells are cleaned. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = [headers, ...rows].map((row) => row.map((c) => clean(c || '-')));
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => row[i]?.length ?? 0)));
  return cells.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

/** A list as a table, or `none` sentence when empty, so an empty answer is still visibly an answer. */
export function formatList(noun: string, headers: readonly string[], rows: readonly (readonly string[])[]): string {
  return rows.length === 0 ? `no ${noun}` : formatTable(headers, rows);
}

/** `label  value` lines with the values aligned; values are cleaned. */
export function formatFields(fields: readonly (readonly [string, string])[]): string {
  const width = Math.max(...fields.map(([label]) => label.length));
  return fields.map(([label, value]) => `${label.padEnd(width)}  ${clean(value || '-')}`).join('\n');
}
