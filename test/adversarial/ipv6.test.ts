import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { postSign } from '../helpers/payments.js';
import { rest, startTestServer, type RestResult, type TestServer } from '../helpers/server.js';

/**
 * The probe's address block against every IPv6 spelling of this machine's loopback. A real HTTP
 * listener on 127.0.0.1 (and one on [::1] at the same port when the host has IPv6 loopback) counts
 * every socket it accepts. The server runs in development mode (http:// allowed) with
 * `127.0.0.1:<port>` on the probe allow-list, so the first test shows the probe does reach the
 * listener when the exact host is exempt; every other spelling must be refused with 400 and the
 * listener must see no connection at all.
 */

const BLOCKED = 'URL is not allowed (private/loopback hosts blocked)';

type CountingListener = { port: number; v6: boolean; accepted: () => number; close: () => Promise<void> };

async function startCountingListener(): Promise<CountingListener> {
  let accepted = 0;
  const answer = (_req: http.IncomingMessage, res: http.ServerResponse) => res.writeHead(200, { connection: 'close' }).end('free');
  const servers = [http.createServer(answer)];
  const listen = (server: http.Server, host: string, port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(servers[0]!, '127.0.0.1', 0);
  const port = (servers[0]!.address() as AddressInfo).port;
  let v6 = false;
  const six = http.createServer(answer);
  try {
    await listen(six, '::1', port);
    servers.push(six);
    v6 = true;
  } catch {
    // No IPv6 loopback here (or the port is taken on it): the IPv4 listener still counts.
  }
  for (const server of servers) server.on('connection', () => accepted++);
  return {
    port,
    v6,
    accepted: () => accepted,
    close: () => Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve())))).then(() => undefined),
  };
}

let listener: CountingListener;
let s: TestServer;

beforeAll(async () => {
  listener = await startCountingListener();
  s = await startTestServer({ dev: true, probeAllowHosts: [`127.0.0.1:${listener.port}`] });
});

afterAll(async () => {
  await s?.close();
  await listener?.close();
});

function quote(url: string): Promise<RestResult> {
  return rest(s.url, 'POST', '/api/quote', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id, url }, headers: { connection: 'close' } });
}

function signPaywall(type: 'x402' | 'mpp', url: string): Promise<RestResult> {
  return postSign(s.url, s.bootstrap.api_key, {
    agent_id: s.bootstrap.agent_id,
    type,
    chain_id: 8453,
    recipient_address: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
    amount_usd: 0.5,
    payload: { resource_url: url },
  });
}

/** Hosts that all mean 127.0.0.1 (or the loopback network) to some stack, in every IPv6 form. */
const LOOPBACK_SPELLINGS = [
  ['IPv4-translated ::ffff:0:0:0/96 (the reported bypass)', '[::ffff:0:127.0.0.1]'],
  ['IPv4-translated, hex tail, uppercase', '[::FFFF:0:7F00:1]'],
  ['IPv4-translated, no zero compression', '[0:0:0:0:ffff:0:127.0.0.1]'],
  ['IPv4-mapped ::ffff:0:0/96', '[::ffff:127.0.0.1]'],
  ['IPv4-mapped, leading zeros, uppercase', '[0000:0000:0000:0000:0000:FFFF:7F00:0001]'],
  ['IPv4-mapped, another loopback address', '[::ffff:127.1.2.3]'],
  ['IPv4-compatible ::a.b.c.d', '[::127.0.0.1]'],
  ['NAT64 well-known prefix 64:ff9b::/96', '[64:ff9b::127.0.0.1]'],
  ['NAT64 well-known prefix, hex tail', '[64:FF9B::7f00:1]'],
  ['local-use NAT64 64:ff9b:1::/48', '[64:ff9b:1::7f00:1]'],
  ['6to4 2002::/16', '[2002:7f00:1::]'],
  ['6to4 with a host part', '[2002:7f00:0001:0:0:0:0:1]'],
  ['Teredo 2001::/32 (server and XORed client both 127.0.0.1)', '[2001:0:7f00:1:0:0:80ff:fffe]'],
  ['ISATAP interface id under a link-local prefix', '[fe80::5efe:127.0.0.1]'],
  ['ISATAP interface id under a global prefix', '[2606:4700::200:5efe:7f00:1]'],
  ['IPv6 loopback', '[::1]'],
  ['IPv6 loopback, uncompressed', '[0:0:0:0:0:0:0:1]'],
] as const;

describe('probe address block: IPv6 forms of loopback', () => {
  test('behavior: the listener counts the probe when its exact host:port is exempt (control)', async () => {
    const before = listener.accepted();
    const r = await quote(`http://127.0.0.1:${listener.port}/control`);
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toBe('URL did not return a payment challenge (status 200)');
    expect(listener.accepted()).toBe(before + 1);
  });

  test.each(LOOPBACK_SPELLINGS)('error: quote refuses %s %s and opens no connection', async (_form, host) => {
    const before = listener.accepted();
    const r = await quote(`http://${host}:${listener.port}/paid`);
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toBe(BLOCKED);
    // https changes nothing: the host is judged before the scheme.
    const secure = await quote(`https://${host}:${listener.port}/paid`);
    expect(secure.json.error).toBe(BLOCKED);
    expect(listener.accepted()).toBe(before);
  });

  test.each(LOOPBACK_SPELLINGS)('error: a paywalled sign refuses %s %s and opens no connection', async (_form, host) => {
    const before = listener.accepted();
    for (const type of ['x402', 'mpp'] as const) {
      const r = await signPaywall(type, `http://${host}:${listener.port}/paid`);
      expect(r.status, r.text).toBe(400);
      expect(r.json.error).toBe(BLOCKED);
    }
    expect(listener.accepted()).toBe(before);
  });

  test('error: a zone id is not a way around the parser: Invalid URL, no connection', async () => {
    const before = listener.accepted();
    for (const host of ['[::ffff:0:127.0.0.1%25lo]', '[fe80::1%25lo]', '[::1%251]']) {
      const r = await quote(`http://${host}:${listener.port}/paid`);
      expect(r.status, r.text).toBe(400);
      expect(r.json.error).toBe('Invalid URL');
    }
    expect(listener.accepted()).toBe(before);
  });
});
