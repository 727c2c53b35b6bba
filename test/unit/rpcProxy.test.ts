import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, test } from 'vitest';
import { startRpcProxy } from '../helpers/rpcProxy.js';

/**
 * The adversarial chain suites' JSON-RPC proxy. A CI run failed on an unhandled rejection from
 * the hand-copied proxies of those suites (a forward to the node that closed its socket); every
 * test had passed. The shared proxy answers a failed forward with 502 instead.
 */
const servers: Array<{ close(): Promise<void> }> = [];
afterAll(async () => {
  for (const s of servers) await s.close();
});

async function post(url: string, body: unknown): Promise<{ status: number; text: string }> {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, text: await r.text() };
}

describe('rpc proxy (test helper)', () => {
  test('behavior: forwards to the node, or answers what the test says', async () => {
    const node = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => res.end(JSON.stringify({ jsonrpc: '2.0', id: (JSON.parse(body) as { id: unknown }).id, result: 'from-node' })));
    });
    await new Promise<void>((r) => node.listen(0, '127.0.0.1', () => r()));
    servers.push({ close: () => new Promise<void>((r) => node.close(() => r())) });
    const proxy = await startRpcProxy(`http://127.0.0.1:${(node.address() as AddressInfo).port}/`, async ({ msg, forward }) =>
      msg.method === 'eth_blockNumber' ? { jsonrpc: '2.0', id: msg.id, result: '0x1' } : forward());
    servers.push(proxy);
    expect(JSON.parse((await post(proxy.url, { jsonrpc: '2.0', id: 1, method: 'eth_chainId' })).text)).toEqual({ jsonrpc: '2.0', id: 1, result: 'from-node' });
    expect(JSON.parse((await post(proxy.url, { jsonrpc: '2.0', id: 2, method: 'eth_blockNumber' })).text)).toEqual({ jsonrpc: '2.0', id: 2, result: '0x1' });
  });

  test('error: a node that is gone is answered 502, with no unhandled rejection', async () => {
    const gone = http.createServer();
    await new Promise<void>((r) => gone.listen(0, '127.0.0.1', () => r()));
    const port = (gone.address() as AddressInfo).port;
    await new Promise<void>((r) => gone.close(() => r()));
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      const proxy = await startRpcProxy(`http://127.0.0.1:${port}/`, ({ forward }) => forward());
      servers.push(proxy);
      const r = await post(proxy.url, { jsonrpc: '2.0', id: 1, method: 'eth_chainId' });
      expect(r.status).toBe(502);
      expect(r.text).toMatch(/^proxy: fetch failed/);
      await new Promise((r2) => setTimeout(r2, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
