import { readBody, type NodeRequest } from '../http/io.js';
import { multipartBoundary, parseMultipart } from './multipart.js';
import { MAX_IMPORT_BYTES } from './pages/services.js';
import { FormFields } from './routes.js';

/** Form posts are small; the registry import may carry a file. */
const MAX_FORM_BYTES = 64 * 1024;
const MAX_MULTIPART_BYTES = MAX_IMPORT_BYTES + 64 * 1024;

/** A non-empty POST body that is not a form. */
export class UnsupportedBody extends Error {}

/**
 * Reads a POST body as urlencoded fields or, for `multipart` routes, as multipart form data, noting
 * every name given more than once (FormFields.repeated). Throws BodyTooLargeError (src/http/io.ts),
 * UnsupportedBody or MultipartError.
 */
export async function readForm(req: NodeRequest, kind: 'form' | 'multipart'): Promise<{ form: FormFields; files: Map<string, Buffer> }> {
  const type = req.headers['content-type'] ?? '';
  const fields = new Map<string, string[]>();
  const files = new Map<string, Buffer>();
  // Every name given twice, as a field or a file: the route decides whether that may be (routes.ts repeatable).
  const repeated: string[] = [];
  const seen = (name: string) => {
    if ((fields.has(name) || files.has(name)) && !repeated.includes(name)) repeated.push(name);
  };
  const add = (name: string, value: string) => {
    seen(name);
    fields.set(name, [...(fields.get(name) ?? []), value]);
  };
  const boundary = kind === 'multipart' ? multipartBoundary(type) : undefined;
  if (boundary !== undefined) {
    const body = await readBody(req, MAX_MULTIPART_BYTES);
    for (const part of await parseMultipart(body, boundary)) {
      if (part.filename !== undefined) {
        seen(part.name);
        files.set(part.name, part.data);
      } else {
        add(part.name, part.data.toString('utf8'));
      }
    }
    return { form: new FormFields(fields, repeated), files };
  }
  const body = await readBody(req, MAX_FORM_BYTES);
  if (body.length > 0 && !/^application\/x-www-form-urlencoded\b/i.test(type)) throw new UnsupportedBody('Expected a form (application/x-www-form-urlencoded).');
  for (const [name, value] of new URLSearchParams(body.toString('utf8'))) add(name, value);
  return { form: new FormFields(fields, repeated), files };
}
