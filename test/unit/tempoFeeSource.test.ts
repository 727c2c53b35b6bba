import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import type { Offer } from '../../src/paywalls/offer.js';
import { DEFAULT_TEMPO_FEES } from '../../src/signing/tempo.js';
import { createTempoFeeSource } from '../../src/signing/tempoFees.js';
import { createChainRpc } from '../../src/chain/rpc.js';

/**
 * The Tempo fee source over viem's public client, against a real loopback JSON-RPC node that
 * misbehaves in one way per test. The happy path (and a node without the methods) is covered
 * end to end in test/tempo-fees.e2e.test.ts.
 */
const TREASURY = '0x1111111111111111111111111111111111111111';
const CURRENCY = '0x20C0000000000000000000000000000000000001';
const PAY_TO = '0x2222222222222222222222222222222222222222';
const OFFER: Offer = {
  rail: 'mpp', chainId: 42431, network: 'tempo-testnet', scheme: null, realm: 'paywall.test', payTo: PAY_TO, asset: CURRENCY,
  amountAtomic: 10_000n, decimals: 6, amountMicros: 10_000n,
  mpp: {
    challenge: { id: 'c1', realm: 'paywall.test', method: 'tempo', intent: 'charge', request: 'e30' },
    request: { amount: '10000', currency: CURRENCY, recipient: PAY_TO, methodDetails: { chainId: 42431 } },
  },
};
const GOOD: Record<string, string> = { eth_chainId: '0xa5bf', eth_gasPrice: '0x4a817c800', eth_maxPriorityFeePerGas: '0x3b9aca00', eth_estimateGas: '0xc350' };
const ESTIMATED = { gas: 55_000n, maxFeePerGas: 40_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };

type Answer = (method: string, id: number, res: http.ServerResponse) => void;
const servers: http.Server[] = [];

/** A node answering each call through `answer`; `methods` records every call received, retries included. */
async function node(answer: Answer): Promise<{ url: string; methods: string[] }> {
  const methods: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const msg = JSON.parse(body) as { id: number; method: string };
      methods.push(msg.method);
      answer(msg.method, msg.id, res);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/provider-key-123/`, methods };
}

function reply(res: http.ServerResponse, id: number, result: unknown, padding = 0): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(' '.repeat(padding) + JSON.stringify({ jsonrpc: '2.0', id, result }));
}

function source(url: string, timeoutMs?: number) {
  const logs: string[] = [];
  const fees = createTempoFeeSource(url, createLogger('warn', { write: (line: string) => void logs.push(line) }), timeoutMs);
  return { fees, logs };
}

afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

describe('Tempo fee source (viem public client)', () => {
  test('behavior: a well-behaved node gives the estimate and its prices', async () => {
    const n = await node((method, id, res) => reply(res, id, GOOD[method]));
    expect(await source(n.url).fees.feesFor(OFFER, TREASURY)).toEqual(ESTIMATED);
  });

  test('error: a node that never answers costs one call and the timeout, then the defaults; no retry', async () => {
    const n = await node(() => {});
    const { fees, logs } = source(n.url, 200);
    expect(await fees.feesFor(OFFER, TREASURY)).toEqual(DEFAULT_TEMPO_FEES);
    expect(n.methods).toEqual(['eth_chainId']);
    expect(logs.join('')).toMatch(/Tempo fee estimate failed/);
  });

  test('error: an answer over 64 KiB is refused and the defaults are used', async () => {
    const n = await node((method, id, res) => reply(res, id, GOOD[method], method === 'eth_gasPrice' ? 100 * 1024 : 0));
    const { fees, logs } = source(n.url);
    expect(await fees.feesFor(OFFER, TREASURY)).toEqual(DEFAULT_TEMPO_FEES);
    expect(logs.join('')).toMatch(/Tempo fee estimate failed/);
  });

  test('error: a result that is not a hex quantity is refused and the defaults are used', async () => {
    const n = await node((method, id, res) => reply(res, id, method === 'eth_estimateGas' ? 50_000 : GOOD[method]));
    expect(await source(n.url).fees.feesFor(OFFER, TREASURY)).toEqual(DEFAULT_TEMPO_FEES);
  });

  test('error: the warning names neither the node URL (it may carry a provider key) nor spans lines', async () => {
    const n = await node((_method, id, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`broken ${id}`);
    });
    const { fees, logs } = source(n.url);
    expect(await fees.feesFor(OFFER, TREASURY)).toEqual(DEFAULT_TEMPO_FEES);
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatch(/Tempo fee estimate failed/);
    expect(logs[0]).not.toMatch(/provider-key-123|127\.0\.0\.1/);
    expect(JSON.parse(logs[0]!).err).not.toMatch(/\n/);
  });

  test('behavior: an --rpc-url entry for the offer\'s chain is used through the shared registry', async () => {
    const n = await node((method, id, res) => reply(res, id, GOOD[method]));
    const logs: string[] = [];
    const fees = createTempoFeeSource({ chains: createChainRpc(new Map([[42431, n.url]])) }, createLogger('warn', { write: (line: string) => void logs.push(line) }));
    expect(await fees.feesFor(OFFER, TREASURY)).toEqual(ESTIMATED);
    expect(n.methods).toContain('eth_estimateGas');
  });

  test('error: an --rpc-url entry whose node serves another chain gives the defaults and a warning naming both chain ids', async () => {
    const n = await node((method, id, res) => reply(res, id, method === 'eth_chainId' ? '0x1' : GOOD[method]));
    const logs: string[] = [];
    const fees = createTempoFeeSource({ chains: createChainRpc(new Map([[42431, n.url]])) }, createLogger('warn', { write: (line: string) => void logs.push(line) }));
    expect(await fees.feesFor(OFFER, TREASURY)).toEqual(DEFAULT_TEMPO_FEES);
    expect(n.methods).toEqual(['eth_chainId']);
    expect(logs.join('')).toMatch(/serves another chain/);
    expect(logs.join('')).not.toMatch(/provider-key-123/);
  });
});
