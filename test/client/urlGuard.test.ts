import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { checkFetchUrl, type UrlGuardOptions } from '../../clients/typescript/src/mcp/urlGuard.js';

/**
 * The MCP server's URL guard (pure parts and the resolver step, with a resolver injected so no
 * name leaves the machine). The stdio end-to-end tests are in mcp.e2e.test.ts.
 */

const strict = { allowHttp: false, allowHosts: new Set<string>() };
const resolvingTo = (...addresses: string[]) => ({ ...strict, resolve: async () => addresses });

async function codeOf(url: string, options: UrlGuardOptions = strict): Promise<string | undefined> {
  try {
    await checkFetchUrl(url, options);
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
}

describe('checkFetchUrl', () => {
  test('behavior: a public https name whose addresses are all public passes', async () => {
    expect(await codeOf('https://api.example.com/x', resolvingTo('93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'))).toBeUndefined();
    expect(await codeOf('https://93.184.215.14/x')).toBeUndefined();
  });

  test.each([['10.1.2.3'], ['127.0.0.1'], ['169.254.169.254'], ['::1'], ['fd00::1'], ['::ffff:192.168.0.1']])(
    'error: a name with any address in a blocked range (%s) is url_not_allowed',
    async (address) => {
      expect(await codeOf('https://rebind.example.com/', resolvingTo('93.184.215.14', address))).toBe('url_not_allowed');
    },
  );

  test('error: a name that does not resolve fails closed (network_error), one that resolves to nothing is refused', async () => {
    expect(await codeOf('https://nowhere.example.com/', { ...strict, resolve: async () => { throw new Error('ENOTFOUND'); } })).toBe('network_error');
    expect(await codeOf('https://empty.example.com/', resolvingTo())).toBe('url_not_allowed');
  });

  test('error: credentials in the URL and non-web schemes are refused', async () => {
    expect(await codeOf('https://user:pw@api.example.com/', resolvingTo('93.184.215.14'))).toBe('url_not_allowed');
    expect(await codeOf('ftp://api.example.com/')).toBe('url_not_allowed');
    expect(await codeOf('not a url')).toBe('url_not_allowed');
  });

  test('behavior: allowHosts exempts exactly host:port (default ports included), and only from the address checks', async () => {
    const dev = { allowHttp: false, allowHosts: new Set(['127.0.0.1:8443', 'localhost:443']) };
    expect(await codeOf('https://127.0.0.1:8443/', dev)).toBeUndefined();
    expect(await codeOf('https://localhost/', dev)).toBeUndefined();
    expect(await codeOf('https://127.0.0.1:8444/', dev)).toBe('url_not_allowed');
    expect(await codeOf('http://127.0.0.1:8443/', dev)).toBe('url_not_allowed');
    expect(await codeOf('http://127.0.0.1:8443/', { ...dev, allowHttp: true })).toBeUndefined();
  });
});

describe('addressPolicy copy', () => {
  test('behavior: the client package ships the server probe\'s address policy unchanged', () => {
    // The client cannot import server code (it installs alone), so it carries a copy; they must not drift.
    const read = (p: string) => readFileSync(new URL(p, import.meta.url), 'utf8');
    expect(read('../../clients/typescript/src/mcp/addressPolicy.ts')).toBe(read('../../src/paywalls/addressPolicy.ts'));
  });
});
