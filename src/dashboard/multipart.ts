/**
 * A small multipart/form-data parser for the one form that uploads a file (the registry import).
 * It works on a body already read within its size limit, accepts at most MAX_PARTS parts, and
 * reads only the `name` and `filename` of each part's Content-Disposition.
 */
export type FormPart = { name: string; filename: string | undefined; data: Buffer };

const MAX_PARTS = 20;
const MAX_HEADER_BYTES = 2048;

/** A malformed multipart body. */
export class MultipartError extends Error {
  override name = 'MultipartError';
}

/** The boundary of a `multipart/form-data` Content-Type, or undefined when it is anything else. */
export function multipartBoundary(contentType: string | undefined): string | undefined {
  if (!contentType || !/^multipart\/form-data\s*;/i.test(contentType)) return undefined;
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  return m ? (m[1] ?? m[2]) : undefined;
}

function headerParam(header: string, param: string): string | undefined {
  // `(^|;)` keeps `name` from matching inside `filename`.
  const m = new RegExp(`(?:^|;)\\s*${param}="([^"]*)"`, 'i').exec(header);
  return m?.[1];
}

/** Splits a body into its parts; throws MultipartError on anything malformed. */
export function parseMultipart(body: Buffer, boundary: string): FormPart[] {
  const delimiter = Buffer.from(`--${boundary}`);
  const CRLF = Buffer.from('\r\n');
  const HEADER_END = Buffer.from('\r\n\r\n');
  let pos = body.indexOf(delimiter);
  if (pos < 0) throw new MultipartError('no multipart boundary in the body');
  const parts: FormPart[] = [];
  for (;;) {
    pos += delimiter.length;
    if (body.subarray(pos, pos + 2).toString('latin1') === '--') return parts;
    if (!body.subarray(pos, pos + 2).equals(CRLF)) throw new MultipartError('malformed multipart delimiter');
    pos += 2;
    const headerEnd = body.indexOf(HEADER_END, pos);
    if (headerEnd < 0 || headerEnd - pos > MAX_HEADER_BYTES) throw new MultipartError('malformed multipart part headers');
    const headers = body.subarray(pos, headerEnd).toString('utf8').split('\r\n');
    const disposition = headers.find((h) => /^content-disposition\s*:/i.test(h));
    if (!disposition) throw new MultipartError('multipart part without Content-Disposition');
    const value = disposition.slice(disposition.indexOf(':') + 1);
    const name = headerParam(value, 'name');
    if (name === undefined) throw new MultipartError('multipart part without a name');
    const dataStart = headerEnd + HEADER_END.length;
    const next = body.indexOf(Buffer.concat([CRLF, delimiter]), dataStart);
    if (next < 0) throw new MultipartError('multipart body ends inside a part');
    parts.push({ name, filename: headerParam(value, 'filename'), data: body.subarray(dataStart, next) });
    if (parts.length > MAX_PARTS) throw new MultipartError(`at most ${MAX_PARTS} form fields`);
    pos = next + CRLF.length;
  }
}
