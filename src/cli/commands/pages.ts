import { PAGE_SIZE } from '../../rpc/pages.js';

/**
 * Every page of a List RPC as one response: the first page's message with the items of the later
 * pages appended to `items(first)` and an empty next_page_token. Pages are fetched one at a time.
 */
export async function allPages<R extends { nextPageToken: string }>(
  fetchPage: (page: { pageSize: number; pageToken: string }) => Promise<R>,
  items: (r: R) => unknown[],
  pageSize: number = PAGE_SIZE.max,
): Promise<R> {
  const first = await fetchPage({ pageSize, pageToken: '' });
  while (first.nextPageToken !== '') {
    const next = await fetchPage({ pageSize, pageToken: first.nextPageToken });
    items(first).push(...items(next));
    first.nextPageToken = next.nextPageToken;
  }
  return first;
}
