import { Busboy } from '@fastify/busboy';

/**
 * multipart/form-data for the one form that uploads a file (the registry import), parsed by
 * @fastify/busboy. It works on a body already read within its size limit, accepts at most
 * MAX_PARTS parts, and keeps only the `name` and `filename` of each part's Content-Disposition.
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

/**
 * Splits a body into its parts, in order; rejects with MultipartError on a body that ends inside a
 * part, a part without a name, or more than MAX_PARTS parts. Parts that are not form-data (no
 * Content-Disposition) are skipped, as browsers never send them.
 */
export function parseMultipart(body: Buffer, boundary: string): Promise<FormPart[]> {
  return new Promise((resolve, reject) => {
    const parts: FormPart[] = [];
    const fail = (message: string) => reject(new MultipartError(message));
    // The body is already bounded, so no field or file is ever cut short: the limits are its length.
    const parser = new Busboy({
      headers: { 'content-type': `multipart/form-data; boundary="${boundary}"` },
      limits: { parts: MAX_PARTS, headerSize: MAX_HEADER_BYTES, fieldSize: body.length, fileSize: body.length },
      // A part is a file when it has a filename, whatever its Content-Type.
      isPartAFile: (_name, _type, filename) => filename !== undefined,
    });
    parser.on('field', (name: string | undefined, value: string, _nameCut: boolean, valueCut: boolean) => {
      if (!name) return fail('multipart part without a name');
      if (valueCut) return fail('multipart field too large');
      parts.push({ name, filename: undefined, data: Buffer.from(value, 'utf8') });
    });
    parser.on('file', (name: string | undefined, stream, filename: string) => {
      if (!name) {
        stream.resume();
        return fail('multipart part without a name');
      }
      const part: FormPart = { name, filename, data: Buffer.alloc(0) };
      parts.push(part);
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => (part.data = Buffer.concat(chunks)));
      stream.on('limit', () => fail('multipart file too large'));
    });
    parser.on('partsLimit', () => fail(`at most ${MAX_PARTS} form fields`));
    parser.on('error', (err: unknown) => fail(`malformed multipart body (${(err as Error).message})`));
    // 'finish' comes after every part's stream has ended; a promise settles once, so an earlier failure stands.
    parser.on('finish', () => resolve(parts));
    parser.end(body);
  });
}
