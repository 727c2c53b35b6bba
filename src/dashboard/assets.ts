import { createHash } from 'node:crypto';
import type { NodeRequest, NodeResponse } from '../http/io.js';
import { send } from '../http/io.js';
import { readBuiltFile } from '../singleExecutable/workerFiles.js';
import { styles } from './static/styles.js';

/** A static file held in memory, revalidated by its ETag. */
export type Asset = { body: Buffer; etag: string; contentType: string };

/** The dashboard's stylesheet and script by URL path, and the version their page links carry. */
export type Assets = { byPath: ReadonlyMap<string, Asset>; version: string };

function asset(body: Buffer, contentType: string): Asset {
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 16)}"`, contentType };
}

/**
 * Loads the static files once. The script is static/client.ts as tsconfig.client.json emitted it:
 * beside this module in dist/, or (under vitest, which runs src/) from the build's dist/.
 */
export function loadAssets(): Assets {
  const css = asset(Buffer.from(styles, 'utf8'), 'text/css; charset=utf-8');
  const js = asset(readBuiltFile('static/client.js', import.meta.url, 'dashboard'), 'text/javascript; charset=utf-8');
  return {
    byPath: new Map([
      ['/dashboard/static/dashboard.css', css],
      ['/dashboard/static/dashboard.js', js],
    ]),
    version: createHash('sha256').update(css.etag).update(js.etag).digest('hex').slice(0, 10),
  };
}

/** The stylesheet or script, revalidated by ETag (their URLs also carry a version). */
export function sendAsset(req: NodeRequest, res: NodeResponse, file: Asset): void {
  if (req.headers['if-none-match'] === file.etag) {
    res.writeHead(304, { etag: file.etag, 'cache-control': 'no-cache' });
    res.end();
    return;
  }
  send(res, 200, { 'content-type': file.contentType, etag: file.etag, 'cache-control': 'no-cache' }, file.body);
}
