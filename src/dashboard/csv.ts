/**
 * CSV as RFC 4180 writes it: fields separated by commas, records by CRLF, and a field quoted
 * (with its quotes doubled) when it holds a comma, a quote, a line break or edge spaces.
 *
 * Text that a spreadsheet would run as a formula (starting with = + - @, tab or CR) gets a leading
 * apostrophe: reasons, labels and names come from agents and operators, and opening an export
 * must not execute them. Numbers and dates this code wrote itself are passed as `{ safe }`, untouched.
 */
export type CsvCell = string | { safe: string };

const FORMULA_START = /^[=+\-@\t\r]/;

/** One field, quoted and neutralized as described above. */
export function csvField(cell: CsvCell): string {
  let text = typeof cell === 'string' ? (FORMULA_START.test(cell) ? `'${cell}` : cell) : cell.safe;
  if (/[",\r\n]/.test(text) || /^\s|\s$/.test(text)) text = `"${text.replace(/"/g, '""')}"`;
  return text;
}

/** One record with its CRLF terminator. */
export function csvRow(cells: readonly CsvCell[]): string {
  return `${cells.map(csvField).join(',')}\r\n`;
}
