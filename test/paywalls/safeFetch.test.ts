import { EventEmitter, once } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { checkUrl, defaultSafeFetchOptions, MAX_URL_CHARS, safeFetch, type ProbeLookup, type SafeFetchOptions } from '../../src/paywalls/safeFetch.js';

// Every socket in this file is on 127.0.0.1; hostile addresses are only ever asserted, never dialed.

const BLOCKED = 'URL is not allowed (private/loopback hosts blocked)';
const SCHEME = 'URL is not allowed (only https:// URLs can be probed)';
const CREDENTIALS = 'URL is not allowed (credentials in URL)';
const INVALID = 'Invalid URL';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;
type Seen = { method: string; url: string; headers: IncomingMessage['headers']; body: string };

/** A local HTTP server on 127.0.0.1:0 that records what it receives. */
async function startServer(handler: Handler): Promise<{ server: Server; port: number; origin: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  servers.push(server);
  return { server, port, origin: `http://127.0.0.1:${port}`, seen };
}

const servers: Array<Server | net.Server> = [];

/** Emits 'hang' when the paywall has received a request it will never answer. */
const hangs = new EventEmitter();

/**
 * Runs `start` under a test clock for safeFetch's own timers, and shows the timeout of `ms` fires
 * exactly then: still pending at ms − 1, rejected at ms. `ready` is awaited on real time first (the
 * peer has the connection or request), so the clock starts with the request really in flight.
 */
async function timesOutAt<T>(ms: number, ready: Promise<unknown>, start: () => Promise<T>): Promise<DomainError> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  try {
    let settled = false;
    const result = start();
    void result.then(() => (settled = true), () => (settled = true));
    await ready;
    await vi.advanceTimersByTimeAsync(ms - 1);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    return await domainError(result);
  } finally {
    vi.useRealTimers();
  }
}

afterAll(async () => {
  for (const server of servers) {
    if ('closeAllConnections' in server) server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

afterEach(() => {
  vi.restoreAllMocks();
});

function options(overrides: Partial<SafeFetchOptions> = {}): SafeFetchOptions {
  return { ...defaultSafeFetchOptions, connectTimeoutMs: 1_000, totalTimeoutMs: 3_000, ...overrides };
}

/** Awaits a promise that must reject with a DomainError and returns it. */
async function domainError(promise: Promise<unknown>): Promise<DomainError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return err as DomainError;
  }
  throw new Error('expected a DomainError');
}

function throwingLookup(): ProbeLookup & ReturnType<typeof vi.fn> {
  return vi.fn(async () => {
    throw new Error('lookup must not be called');
  });
}

function fixedLookup(...addresses: string[]): ProbeLookup & ReturnType<typeof vi.fn> {
  return vi.fn(async () => addresses.map((address) => ({ address, family: net.isIPv6(address) ? (6 as const) : (4 as const) })));
}

function spyOnConnect() {
  return vi.spyOn(net.Socket.prototype, 'connect');
}

const HOSTILE: ReadonlyArray<[string, string]> = [
  // Names reserved for the local machine or network.
  ['http://localhost/', BLOCKED],
  ['http://localhost:3000/api', BLOCKED],
  ['http://LOCALHOST./', BLOCKED],
  ['https://localhost./', BLOCKED],
  ['http://api.localhost/', BLOCKED],
  ['http://printer.local/', BLOCKED],
  ['http://db.internal/', BLOCKED],
  ['http://DB.Internal./', BLOCKED],
  ['http://metadata.google.internal/computeMetadata/v1/', BLOCKED],
  ['http://./', BLOCKED],
  // Loopback, in every spelling the URL parser folds to 127.0.0.1.
  ['http://127.0.0.1:8080/', BLOCKED],
  ['http://127.0.0.1./', BLOCKED],
  ['http://127.255.255.254/', BLOCKED],
  ['http://2130706433/', BLOCKED],
  ['http://0177.0.0.1/', BLOCKED],
  ['http://0x7f.0.0.1/', BLOCKED],
  ['http://0x7f.1/', BLOCKED],
  ['http://127.1/', BLOCKED],
  ['http://0x7f000001/', BLOCKED],
  ['http://017700000001/', BLOCKED],
  ['http://%30x7f.1/', BLOCKED],
  ['http://127.0.0.1%2e/', BLOCKED],
  ['http://１２７.０.０.１/', BLOCKED],
  ['http://①②⑦.0.0.1/', BLOCKED],
  ['http:127.0.0.1/', BLOCKED],
  ['http:/\\127.0.0.1/', BLOCKED],
  ['http://127.0.0.1#@example.com/', BLOCKED],
  ['HTTPS://LOCALHOST/', BLOCKED],
  // IPv6 loopback, unspecified and IPv4-embedding forms.
  ['http://[::1]/', BLOCKED],
  ['http://[0:0:0:0:0:0:0:1]/', BLOCKED],
  ['http://[::]/', BLOCKED],
  ['http://[::ffff:127.0.0.1]/', BLOCKED],
  ['http://[::ffff:7f00:1]/', BLOCKED],
  ['http://[::ffff:a9fe:a9fe]/', BLOCKED],
  ['http://[::127.0.0.1]/', BLOCKED],
  ['http://[64:ff9b::7f00:1]/', BLOCKED],
  ['http://[64:ff9b::10.0.0.1]/', BLOCKED],
  ['http://[2002:7f00:1::]/', BLOCKED],
  ['http://[fe80::1]/', BLOCKED],
  ['http://[febf::1]/', BLOCKED],
  ['http://[fd00::1]/', BLOCKED],
  ['http://[fc00::1]/', BLOCKED],
  ['http://[fd00:ec2::254]/', BLOCKED],
  ['http://[ff02::1]/', BLOCKED],
  ['http://[2001:db8::1]/', BLOCKED],
  // Metadata services and private, shared, documentation and special IPv4 ranges.
  ['http://169.254.169.254/latest/meta-data', BLOCKED],
  ['https://169.254.169.254/', BLOCKED],
  ['http://0xa9fea9fe/', BLOCKED],
  ['http://10.0.0.1/', BLOCKED],
  ['http://10.1/', BLOCKED],
  ['http://172.16.5.4/', BLOCKED],
  ['http://172.31.255.255/', BLOCKED],
  ['http://192.168.1.1/', BLOCKED],
  ['http://0300.0250.0.1/', BLOCKED],
  ['http://3232235777/', BLOCKED],
  ['http://100.64.0.1/', BLOCKED],
  ['http://100.100.100.200/', BLOCKED],
  ['http://0.0.0.0/', BLOCKED],
  ['http://0/', BLOCKED],
  ['http://0.0.0.0:3000/', BLOCKED],
  ['http://192.0.0.192/', BLOCKED],
  ['http://192.0.2.1/', BLOCKED],
  ['http://198.18.0.1/', BLOCKED],
  ['http://198.51.100.7/', BLOCKED],
  ['http://203.0.113.5/', BLOCKED],
  ['http://224.0.0.1/', BLOCKED],
  ['http://239.255.255.250/', BLOCKED],
  ['http://240.0.0.1/', BLOCKED],
  ['http://255.255.255.255/', BLOCKED],
  // Schemes other than http(s).
  ['ftp://example.com/', SCHEME],
  ['file:///etc/passwd', SCHEME],
  ['javascript:alert(1)', SCHEME],
  ['data:text/plain,hi', SCHEME],
  ['gopher://example.com:70/', SCHEME],
  ['ws://example.com/', SCHEME],
  ['mailto:pay@example.com', SCHEME],
  // Credentials, which would also be a way to smuggle a second host past a naive check.
  ['http://user:pw@example.com/', CREDENTIALS],
  ['https://user@example.com/', CREDENTIALS],
  ['https://:secret@example.com/', CREDENTIALS],
  ['http://example.com@127.0.0.1/', CREDENTIALS],
  ['https://user:pw@localhost/', CREDENTIALS],
  // Not absolute URLs at all.
  ['', INVALID],
  ['not a url', INVALID],
  ['//example.com/path', INVALID],
  ['/relative/path', INVALID],
  ['http://', INVALID],
  ['http://[::1', INVALID],
  ['http://256.0.0.1/', INVALID],
  ['http://1.2.3.4.5/', INVALID],
  ['http://[fe80::1%25eth0]/', INVALID],
  ['https://exa mple.com/', INVALID],
  ['http://127.0.0.1%00/', INVALID],
];

describe('checkUrl', () => {
  test('behavior: returns the parsed URL of a public https URL without touching the network', () => {
    const connect = spyOnConnect();
    const url = checkUrl('https://api.example.com/v1/data?x=1', options());
    expect(url.href).toBe('https://api.example.com/v1/data?x=1');
    expect(connect).not.toHaveBeenCalled();
  });

  test('error: invalid_url for a URL longer than MAX_URL_CHARS; one at the bound passes', () => {
    const url = `https://api.example.com/${'a'.repeat(MAX_URL_CHARS)}`;
    expect(() => checkUrl(url, options())).toThrow(expect.objectContaining({ code: 'invalid_url', shortMessage: `Invalid URL (longer than ${MAX_URL_CHARS} characters)` }));
    expect(checkUrl(url.slice(0, MAX_URL_CHARS), options()).href).toBe(url.slice(0, MAX_URL_CHARS));
  });

  test.each(['https://8.8.8.8/', 'https://172.32.0.1/', 'https://100.128.0.1/', 'https://[2606:4700:4700::1111]/', 'https://localhost.example.com/'])(
    'behavior: allows public host %s',
    (url) => {
      expect(checkUrl(url, options()).href).toBe(url);
    },
  );

  test.each(HOSTILE)('error: invalid_argument for %j', (url, reason) => {
    for (const allowHttp of [false, true]) {
      let caught: unknown;
      try {
        checkUrl(url, options({ allowHttp }));
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(DomainError);
      expect((caught as DomainError).kind).toBe('invalid_argument');
      expect((caught as DomainError).shortMessage).toBe(reason);
      expect((caught as DomainError).code).toBe(reason === INVALID ? 'invalid_url' : 'url_not_allowed');
    }
  });

  test('error: http:// is refused unless allowHttp, and the allow list does not change that', () => {
    const allowHosts = new Set(['127.0.0.1:43123']);
    expect(() => checkUrl('http://example.com/', options())).toThrow(SCHEME);
    expect(() => checkUrl('http://127.0.0.1:43123/', options({ allowHosts }))).toThrow(SCHEME);
    expect(checkUrl('http://example.com/', options({ allowHttp: true })).hostname).toBe('example.com');
    expect(checkUrl('http://127.0.0.1:43123/', options({ allowHttp: true, allowHosts })).port).toBe('43123');
  });

  test('behavior: the allow list exempts exactly one host:port', () => {
    const allowHosts = new Set(['127.0.0.1:43123']);
    const dev = options({ allowHttp: true, allowHosts });
    expect(() => checkUrl('http://127.0.0.1:43123/', dev)).not.toThrow();
    expect(() => checkUrl('http://2130706433:43123/', dev)).not.toThrow();
    expect(() => checkUrl('http://127.0.0.1:43124/', dev)).toThrow(BLOCKED);
    expect(() => checkUrl('http://127.0.0.1/', dev)).toThrow(BLOCKED);
    expect(() => checkUrl('http://127.0.0.2:43123/', dev)).toThrow(BLOCKED);
    expect(() => checkUrl('http://localhost:43123/', dev)).toThrow(BLOCKED);
  });
});

describe('safeFetch', () => {
  test.each(HOSTILE)('error: %j is refused before any lookup or connection', async (url, reason) => {
    const lookup = throwingLookup();
    const connect = spyOnConnect();
    for (const allowHttp of [false, true]) {
      const err = await domainError(safeFetch(url, { method: 'GET' }, options({ allowHttp, lookup })));
      expect(err.kind).toBe('invalid_argument');
      expect(err.shortMessage).toBe(reason);
    }
    expect(lookup).not.toHaveBeenCalled();
    expect(connect).not.toHaveBeenCalled();
  });

  describe('names that resolve to blocked addresses', () => {
    test.each([
      ['10.0.0.5'],
      ['127.0.0.1'],
      ['169.254.169.254'],
      ['::1'],
      ['::ffff:192.168.0.10'],
      ['fd12:3456::1'],
      ['::ffff:0:7f00:1'],
      ['2002:7f00:1::1'],
      ['93.184.215.14', '10.0.0.5'],
      ['2606:4700::6810:84e5', '127.0.0.1'],
    ])('error: evil.example -> %s is blocked without connecting', async (...addresses) => {
      const lookup = fixedLookup(...addresses);
      const connect = spyOnConnect();
      const err = await domainError(safeFetch('https://evil.example/pay', { method: 'GET' }, options({ lookup })));
      expect(err.shortMessage).toBe(BLOCKED);
      expect(err.code).toBe('url_not_allowed');
      expect(lookup).toHaveBeenCalledTimes(1);
      expect(lookup).toHaveBeenCalledWith('evil.example');
      expect(connect).not.toHaveBeenCalled();
    });
  });

  test('error: a DNS failure is reported without the resolver message', async () => {
    const lookup = vi.fn(async (): Promise<never> => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND nope.example'), { code: 'ENOTFOUND' });
    });
    const connect = spyOnConnect();
    const err = await domainError(safeFetch('https://nope.example/', { method: 'GET' }, options({ lookup })));
    expect(err.shortMessage).toBe('Could not reach URL: DNS lookup failed');
    expect(err.code).toBe('unreachable');
    expect(err.kind).toBe('invalid_argument');
    expect(connect).not.toHaveBeenCalled();

    const empty = await domainError(safeFetch('https://nope.example/', { method: 'GET' }, options({ lookup: fixedLookup() })));
    expect(empty.shortMessage).toBe('Could not reach URL: DNS lookup failed');
  });

  test('error: a lookup that never answers times out', async () => {
    const lookup = vi.fn(() => new Promise<never>(() => {}));
    const err = await domainError(safeFetch('https://slow.example/', { method: 'GET' }, options({ lookup, totalTimeoutMs: 100 })));
    expect(err.shortMessage).toBe('Could not reach URL: request timed out');
  });

  describe('against a local server', () => {
    let paywall: Awaited<ReturnType<typeof startServer>>;
    let other: Awaited<ReturnType<typeof startServer>>;
    let dev: SafeFetchOptions;

    beforeAll(async () => {
      paywall = await startServer((req, res) => {
        const url = req.url ?? '/';
        if (url === '/paid') {
          res.writeHead(402, [
            ['Content-Type', 'application/json'],
            ['WWW-Authenticate', 'Payment id="a", realm="r1"'],
            ['WWW-Authenticate', 'Payment id="b", realm="r2"'],
            ['X-Custom', 'one'],
            ['Constructor', 'not-a-prototype'],
            ['__proto__', 'plain-value'],
          ]);
          res.end(JSON.stringify({ x402Version: 2, accepts: [{ scheme: 'exact' }] }));
        } else if (url === '/status/405' || url === '/status/500') {
          res.writeHead(Number(url.slice(-3)), { 'content-type': 'text/plain' });
          res.end('nope');
        } else if (url === '/echo') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{}');
        } else if (url === '/to-private') {
          res.writeHead(302, { location: 'http://10.0.0.1/' });
          res.end();
        } else if (url === '/to-metadata') {
          res.writeHead(301, { location: 'http://169.254.169.254/latest/meta-data' });
          res.end();
        } else if (url === '/to-localhost') {
          res.writeHead(307, { location: 'http://localhost/' });
          res.end();
        } else if (url === '/to-name') {
          res.writeHead(302, { location: 'https://evil.example/steal' });
          res.end();
        } else if (url === '/to-ftp') {
          res.writeHead(302, { location: 'ftp://example.com/' });
          res.end();
        } else if (url === '/to-paid') {
          res.writeHead(302, { location: '/paid' });
          res.end();
        } else if (url.startsWith('/chain/')) {
          const left = Number(url.slice('/chain/'.length));
          res.writeHead(302, { location: left > 0 ? `/chain/${left - 1}` : '/paid' });
          res.end();
        } else if (url === '/see-other') {
          res.writeHead(303, { location: '/echo' });
          res.end();
        } else if (url === '/temporary') {
          res.writeHead(307, { location: '/echo' });
          res.end();
        } else if (url === '/cross-origin') {
          res.writeHead(307, { location: `${other.origin}/echo` });
          res.end();
        } else if (url === '/no-location') {
          res.writeHead(302);
          res.end();
        } else if (url.startsWith('/bytes/')) {
          const n = Number(url.slice('/bytes/'.length));
          res.writeHead(402, { 'content-type': 'application/json' });
          res.end(Buffer.alloc(n, 0x61));
        } else if (url.startsWith('/chunked/')) {
          const n = Number(url.slice('/chunked/'.length));
          res.writeHead(url.endsWith('?ok') ? 200 : 402, { 'content-type': 'application/json' });
          for (let sent = 0; sent < n; sent += 500) res.write(Buffer.alloc(Math.min(500, n - sent), 0x62));
          res.end();
        } else if (url === '/huge-headers') {
          res.writeHead(402, { 'x-big': 'h'.repeat(20_000) });
          res.end();
        } else if (url === '/cut') {
          res.writeHead(402, { 'content-length': '1000' });
          // Cut once the partial body has reached the socket, so the client has seen it start.
          res.write('partial', () => res.socket?.destroy());
        } else if (url === '/hang') {
          // Never answers: the probe's total timeout must end it.
          hangs.emit('hang');
        } else {
          res.writeHead(404);
          res.end();
        }
      });
      other = await startServer((_req, res) => {
        res.writeHead(402, { 'content-type': 'application/json' });
        res.end('{"other":true}');
      });
      dev = options({ allowHttp: true, allowHosts: new Set([`127.0.0.1:${paywall.port}`, `127.0.0.1:${other.port}`]) });
    });

    test('behavior: returns a 402 with its headers and JSON body intact', async () => {
      const res = await safeFetch(`${paywall.origin}/paid`, { method: 'GET' }, dev);
      expect(res.status).toBe(402);
      expect(res.url).toBe(`${paywall.origin}/paid`);
      expect(res.headers['www-authenticate']).toBe('Payment id="a", realm="r1", Payment id="b", realm="r2"');
      expect(res.headers['content-type']).toBe('application/json');
      expect(res.headers['x-custom']).toBe('one');
      expect(res.headers.constructor).toBe('not-a-prototype');
      expect(Object.getOwnPropertyDescriptor(res.headers, '__proto__')?.value).toBe('plain-value');
      expect(Object.getPrototypeOf(res.headers)).toBe(Object.prototype);
      expect(Object.keys(res.headers).every((name) => name === name.toLowerCase())).toBe(true);
      expect(JSON.parse(res.body.toString('utf8'))).toEqual({ x402Version: 2, accepts: [{ scheme: 'exact' }] });
      const sent = paywall.seen.at(-1);
      expect(sent?.headers.accept).toBe('application/json');
      expect(sent?.headers['user-agent']).toBe('paypolicy-probe/1');
      expect(sent?.headers.host).toBe(`127.0.0.1:${paywall.port}`);
    });

    test('behavior: non-2xx statuses are returned, not thrown', async () => {
      expect((await safeFetch(`${paywall.origin}/status/405`, { method: 'GET' }, dev)).status).toBe(405);
      expect((await safeFetch(`${paywall.origin}/status/500`, { method: 'GET' }, dev)).status).toBe(500);
      expect((await safeFetch(`${paywall.origin}/missing`, { method: 'GET' }, dev)).status).toBe(404);
      const noLocation = await safeFetch(`${paywall.origin}/no-location`, { method: 'GET' }, dev);
      expect(noLocation.status).toBe(302);
    });

    test('behavior: POST sends the body and the caller headers, but not caller framing headers', async () => {
      const res = await safeFetch(
        `${paywall.origin}/echo`,
        { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Payment': 'proof', Host: 'evil.example', 'Content-Length': '1' }, body: '{"a":1}' },
        dev,
      );
      expect(res.status).toBe(200);
      const sent = paywall.seen.at(-1);
      expect(sent?.method).toBe('POST');
      expect(sent?.body).toBe('{"a":1}');
      expect(sent?.headers['content-type']).toBe('application/json');
      expect(sent?.headers['x-payment']).toBe('proof');
      expect(sent?.headers.host).toBe(`127.0.0.1:${paywall.port}`);
      expect(sent?.headers['content-length']).toBe('7');
    });

    test('behavior: connects to the address it checked, keeping the name in Host', async () => {
      // `.test` never resolves through the system resolver, so reaching the server proves the pinned address was used.
      const lookup = fixedLookup('127.0.0.1');
      const pinned = { ...dev, lookup, allowHosts: new Set([`pinned.test:${paywall.port}`]) };
      const res = await safeFetch(`http://pinned.test:${paywall.port}/paid`, { method: 'GET' }, pinned);
      expect(res.status).toBe(402);
      expect(lookup).toHaveBeenCalledTimes(1);
      expect(paywall.seen.at(-1)?.headers.host).toBe(`pinned.test:${paywall.port}`);
    });

    test('error: the allow list is per host:port, so the same name on the default set is blocked', async () => {
      const lookup = fixedLookup('127.0.0.1');
      const err = await domainError(safeFetch(`http://pinned.test:${paywall.port}/paid`, { method: 'GET' }, { ...dev, lookup, allowHosts: new Set() }));
      expect(err.shortMessage).toBe(BLOCKED);
    });

    test('error: http:// is refused when allowHttp is false, even for an allowed host', async () => {
      const connect = spyOnConnect();
      const err = await domainError(safeFetch(`${paywall.origin}/paid`, { method: 'GET' }, { ...dev, allowHttp: false }));
      expect(err.shortMessage).toBe(SCHEME);
      expect(connect).not.toHaveBeenCalled();
    });

    test('error: the default (empty) allow list blocks the local server', async () => {
      const connect = spyOnConnect();
      const err = await domainError(safeFetch(`${paywall.origin}/paid`, { method: 'GET' }, options({ allowHttp: true })));
      expect(err.shortMessage).toBe(BLOCKED);
      expect(connect).not.toHaveBeenCalled();
    });

    test.each([
      ['/to-private', BLOCKED],
      ['/to-metadata', BLOCKED],
      ['/to-localhost', BLOCKED],
      ['/to-ftp', SCHEME],
    ])('error: a redirect from %s is checked before connecting', async (path, reason) => {
      const lookup = throwingLookup();
      const connect = spyOnConnect();
      const err = await domainError(safeFetch(`${paywall.origin}${path}`, { method: 'GET' }, { ...dev, lookup }));
      expect(err.shortMessage).toBe(reason);
      // Only the first hop, to the local server, ever opened a socket.
      expect(connect).toHaveBeenCalledTimes(1);
      expect(lookup).not.toHaveBeenCalled();
    });

    test('error: a redirect to a name is resolved and checked like the first hop', async () => {
      const lookup = fixedLookup('93.184.215.14', '10.0.0.5');
      const connect = spyOnConnect();
      const err = await domainError(safeFetch(`${paywall.origin}/to-name`, { method: 'GET' }, { ...dev, lookup }));
      expect(err.shortMessage).toBe(BLOCKED);
      expect(lookup).toHaveBeenCalledTimes(1);
      expect(lookup).toHaveBeenCalledWith('evil.example');
      expect(connect).toHaveBeenCalledTimes(1);
    });

    test('behavior: follows a relative redirect to another allowed path and reports the final URL', async () => {
      const res = await safeFetch(`${paywall.origin}/to-paid`, { method: 'GET' }, dev);
      expect(res.status).toBe(402);
      expect(res.url).toBe(`${paywall.origin}/paid`);
      // Every hop is reported, so attribution can judge all of them, not only the first.
      expect(res.chain).toEqual([`${paywall.origin}/to-paid`, `${paywall.origin}/paid`]);
    });

    test('behavior: a probe that is not redirected reports a chain of one', async () => {
      const res = await safeFetch(`${paywall.origin}/paid`, { method: 'GET' }, dev);
      expect(res.chain).toEqual([`${paywall.origin}/paid`]);
    });

    test('behavior: follows exactly maxRedirects redirects', async () => {
      const res = await safeFetch(`${paywall.origin}/chain/2`, { method: 'GET' }, dev);
      expect(res.status).toBe(402);
      expect(res.url).toBe(`${paywall.origin}/paid`);
      expect(res.chain).toHaveLength(dev.maxRedirects + 1);
      expect(res.chain[0]).toBe(`${paywall.origin}/chain/2`);
      expect(res.chain.at(-1)).toBe(res.url);
    });

    test('error: a redirect chain longer than maxRedirects fails', async () => {
      const before = paywall.seen.length;
      const err = await domainError(safeFetch(`${paywall.origin}/chain/3`, { method: 'GET' }, dev));
      expect(err.shortMessage).toBe('Could not reach URL: too many redirects');
      expect(err.code).toBe('unreachable');
      expect(paywall.seen.length - before).toBe(dev.maxRedirects + 1);
      const none = await domainError(safeFetch(`${paywall.origin}/to-paid`, { method: 'GET' }, { ...dev, maxRedirects: 0 }));
      expect(none.shortMessage).toBe('Could not reach URL: too many redirects');
    });

    test('behavior: 303 turns a POST into a GET without its body', async () => {
      await safeFetch(`${paywall.origin}/see-other`, { method: 'POST', body: '{"a":1}' }, dev);
      const sent = paywall.seen.at(-1);
      expect(sent?.url).toBe('/echo');
      expect(sent?.method).toBe('GET');
      expect(sent?.body).toBe('');
    });

    test('behavior: 307 on the same origin keeps the method, body and headers', async () => {
      await safeFetch(`${paywall.origin}/temporary`, { method: 'POST', headers: { authorization: 'Payment x' }, body: 'keep' }, dev);
      const sent = paywall.seen.at(-1);
      expect(sent?.url).toBe('/echo');
      expect(sent?.method).toBe('POST');
      expect(sent?.body).toBe('keep');
      expect(sent?.headers.authorization).toBe('Payment x');
    });

    test('behavior: a redirect to another origin carries neither the body nor the caller headers', async () => {
      const res = await safeFetch(
        `${paywall.origin}/cross-origin`,
        { method: 'POST', headers: { Authorization: 'Payment secret', 'X-Payment': 'proof', Cookie: 'a=b', 'User-Agent': 'custom/1' }, body: 'secret-body' },
        dev,
      );
      expect(res.status).toBe(402);
      expect(res.url).toBe(`${other.origin}/echo`);
      expect(res.chain).toEqual([`${paywall.origin}/cross-origin`, `${other.origin}/echo`]);
      const sent = other.seen.at(-1);
      expect(sent?.method).toBe('POST');
      expect(sent?.body).toBe('');
      expect(sent?.headers.authorization).toBeUndefined();
      expect(sent?.headers['x-payment']).toBeUndefined();
      expect(sent?.headers.cookie).toBeUndefined();
      expect(sent?.headers.accept).toBe('application/json');
      expect(sent?.headers['user-agent']).toBe('custom/1');
    });

    test('behavior: a 402 body up to maxBodyBytes is read in full', async () => {
      const res = await safeFetch(`${paywall.origin}/bytes/1024`, { method: 'GET' }, { ...dev, maxBodyBytes: 1024 });
      expect(res.status).toBe(402);
      expect(res.body.length).toBe(1024);
    });

    test.each(['/bytes/1025', '/chunked/5000'])('error: a body past maxBodyBytes fails (%s)', async (path) => {
      const err = await domainError(safeFetch(`${paywall.origin}${path}`, { method: 'GET' }, { ...dev, maxBodyBytes: 1024 }));
      expect(err.shortMessage).toBe('Could not reach URL: response body too large');
      expect(err.code).toBe('unreachable');
    });

    test('behavior: a large non-402 body is not read; the status alone comes back', async () => {
      const r = await safeFetch(`${paywall.origin}/chunked/50000?ok`, { method: 'GET' }, { ...dev, maxBodyBytes: 1024 });
      expect(r.status).toBe(200);
      expect(r.body.length).toBe(0);
    });

    test('error: response headers past maxHeaderBytes fail', async () => {
      const err = await domainError(safeFetch(`${paywall.origin}/huge-headers`, { method: 'GET' }, { ...dev, maxHeaderBytes: 8 * 1024 }));
      expect(err.shortMessage).toBe('Could not reach URL: response headers too large');
    });

    test('error: a response cut short fails', async () => {
      const err = await domainError(safeFetch(`${paywall.origin}/cut`, { method: 'GET' }, dev));
      expect(err.shortMessage).toMatch(/^Could not reach URL: (connection closed before the response ended|connection reset)$/);
    });

    test('error: a server that never answers times out at the total bound, not before', async () => {
      const err = await timesOutAt(300, once(hangs, 'hang'), () => safeFetch(`${paywall.origin}/hang`, { method: 'GET' }, { ...dev, totalTimeoutMs: 300 }));
      expect(err.shortMessage).toBe('Could not reach URL: request timed out');
      expect(err.code).toBe('unreachable');
    });
  });

  test('error: a TLS handshake that never completes hits the connect timeout', async () => {
    // A TCP listener that accepts and stays silent: the TLS client hello is never answered.
    const silent = net.createServer((socket) => socket.resume());
    servers.push(silent);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as AddressInfo).port;
    const err = await timesOutAt(200, once(silent, 'connection'), () =>
      safeFetch(`https://127.0.0.1:${port}/`, { method: 'GET' }, options({ allowHosts: new Set([`127.0.0.1:${port}`]), connectTimeoutMs: 200 })));
    expect(err.shortMessage).toBe('Could not reach URL: connect timed out');
  });

  test('error: TLS to a plain-HTTP server is a TLS error with no raw message', async () => {
    const plain = await startServer((_req, res) => res.end('plain'));
    const err = await domainError(safeFetch(`https://127.0.0.1:${plain.port}/`, { method: 'GET' }, options({ allowHosts: new Set([`127.0.0.1:${plain.port}`]) })));
    expect(err.shortMessage).toMatch(/^Could not reach URL: TLS error( \([A-Z0-9_]+\))?$/);
    expect(err.code).toBe('unreachable');
  });

  test('error: a refused connection', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const err = await domainError(
      safeFetch(`http://127.0.0.1:${port}/`, { method: 'GET' }, options({ allowHttp: true, allowHosts: new Set([`127.0.0.1:${port}`]) })),
    );
    expect(err.shortMessage).toBe('Could not reach URL: connection refused');
    expect(err.code).toBe('unreachable');
    expect(err.shortMessage).not.toContain(String(port));
  });
});
