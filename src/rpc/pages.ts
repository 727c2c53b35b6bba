import { invalidArgument } from '../domain/errors.js';

/** page_size bounds of every List RPC: 0 means the default. */
export const PAGE_SIZE = { default: 50, max: 500 } as const;
/**
 * Pages of policy versions: a version can carry a thousand-entry allowlist and every limit
 * (~60 KiB), so fifty stay under the 4 MiB a gRPC client receives by default.
 */
export const VERSION_PAGE_SIZE = { default: 20, max: 50 } as const;

/** The sort key of a listed item, compared element by element (numbers as numbers, strings by code unit). */
export type PageKey = readonly (string | number)[];

export type PageRequest = { pageSize: number; pageToken: string };

function compareKeys(a: PageKey, b: PageKey): number {
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x < y) return -1;
    if (x > y) return 1;
  }
  return 0;
}

/** The key a token carries, if it has the shape of `like` (a key of the same list). */
function decodeToken(token: string, like: PageKey | undefined): PageKey {
  try {
    const key = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown;
    const fits = (v: unknown, i: number) =>
      like === undefined ? Number.isSafeInteger(v) || (typeof v === 'string' && v.length <= 200)
        : typeof like[i] === 'number' ? Number.isSafeInteger(v) : typeof v === 'string' && v.length <= 200;
    if (Array.isArray(key) && key.length > 0 && key.length === (like?.length ?? key.length) && key.every(fits)) return key as PageKey;
  } catch {
    // fall through to the error below
  }
  throw invalidArgument('page_token is malformed');
}

/**
 * One page of a list a use case returns in full, in the order it returns it (`order` says whether
 * that is ascending or descending by `keyOf`). The token is the key of the page's last item, so a
 * page never repeats or skips an item because another was added or removed before it.
 */
export function pageOf<T>(
  items: readonly T[], req: PageRequest, keyOf: (item: T) => PageKey, order: 'asc' | 'desc', bounds: { default: number; max: number } = PAGE_SIZE,
): { page: T[]; nextPageToken: string } {
  const size = req.pageSize || bounds.default;
  if (!Number.isInteger(size) || size < 1 || size > bounds.max) throw invalidArgument(`page_size must be between 1 and ${bounds.max}`);
  const sign = order === 'asc' ? 1 : -1;
  let rest = items;
  if (req.pageToken !== '') {
    const after = decodeToken(req.pageToken, items[0] === undefined ? undefined : keyOf(items[0]));
    rest = items.filter((item) => compareKeys(keyOf(item), after) * sign > 0);
  }
  const page = rest.slice(0, size);
  const last = page[page.length - 1];
  const nextPageToken = rest.length > size && last ? Buffer.from(JSON.stringify(keyOf(last))).toString('base64url') : '';
  return { page, nextPageToken };
}
