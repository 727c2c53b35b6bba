import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { getAddress } from 'viem';
import { Transaction } from 'viem/tempo';
import { adminFor, createAgent, type Admin } from './helpers/admin.js';
import { postSign, setPolicy } from './helpers/payments.js';
import { MPP_RECIPIENT, startMppPeer, type MppPeer } from './helpers/peers.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/** A Tempo JSON-RPC node on loopback answering the fee questions with fixed values, recording calls. */
async function startTempoRpc(answers: Record<string, unknown>) {
  const calls: Array<{ method: string; params: unknown[] }> = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const msg = JSON.parse(body) as { id: number; method: string; params: unknown[] };
      calls.push({ method: msg.method, params: msg.params });
      const result = answers[msg.method];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(result === undefined
        ? { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'method not found' } }
        : { jsonrpc: '2.0', id: msg.id, result }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/`, calls, close: () => new Promise<void>((r) => server.close(() => r())) };
}

function signedTempoTx(paymentHeaderValue: string) {
  const credential = JSON.parse(Buffer.from(paymentHeaderValue.slice('Payment '.length), 'base64url').toString('utf8')) as { payload: { signature: `0x${string}` } };
  return Transaction.deserialize(credential.payload.signature) as unknown as { gas: bigint; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };
}

describe('MPP gas and fees from PAYPOLICY_TEMPO_RPC_URL', () => {
  let peer: MppPeer;
  let rpc: Awaited<ReturnType<typeof startTempoRpc>>;
  let broken: Awaited<ReturnType<typeof startTempoRpc>>;
  let s: TestServer;
  let withBroken: TestServer;
  let admin: Admin;

  beforeAll(async () => {
    peer = await startMppPeer();
    rpc = await startTempoRpc({ eth_chainId: '0xa5bf', eth_gasPrice: '0x4a817c800', eth_maxPriorityFeePerGas: '0x3b9aca00', eth_estimateGas: '0xc350' });
    broken = await startTempoRpc({ eth_chainId: '0xa5bf' });
    [s, withBroken] = await Promise.all([
      startTestServer({ dev: true, probeAllowHosts: [peer.host], tempoRpcUrl: rpc.url }),
      startTestServer({ dev: true, probeAllowHosts: [peer.host], tempoRpcUrl: broken.url }),
    ]);
    admin = adminFor(s);
  });
  afterAll(async () => {
    await Promise.all([s?.close(), withBroken?.close()]);
    await Promise.all([peer?.close(), rpc?.close(), broken?.close()]);
  });

  async function agentOn(server: TestServer): Promise<string> {
    const a = server === s ? admin : adminFor(server);
    const id = await createAgent(a, server.bootstrap.org_id, 'fees');
    await setPolicy(a, id, { allowlist: [MPP_RECIPIENT], capUsd: '10', thresholdUsd: '1' });
    return id;
  }

  test('behavior: the signed Tempo transaction carries the estimate and the node\'s prices, and the paywall accepts it', async () => {
    const agentId = await agentOn(s);
    const url = peer.url('/fees/a');
    const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'mpp', payload: { resource_url: url } });
    expect(r.status, r.text).toBe(200);
    const tx = signedTempoTx(r.json.payment_header.value);
    expect(tx.gas).toBe(55_000n); // 50,000 estimated + 5,000 buffer
    expect(tx.maxFeePerGas).toBe(40_000_000_000n); // twice eth_gasPrice
    expect(tx.maxPriorityFeePerGas).toBe(1_000_000_000n);
    const estimate = rpc.calls.find((c) => c.method === 'eth_estimateGas')!;
    expect(estimate.params[0]).toMatchObject({ from: getAddress(s.bootstrap.treasury_address), to: expect.stringMatching(/^0x20c0/i) });
    const paid = await fetch(url, { headers: { accept: 'application/json', [r.json.payment_header.name]: r.json.payment_header.value } });
    expect(paid.status, await paid.clone().text()).toBe(200);
  });

  test('error: when the node cannot answer, the documented defaults are used and a warning is logged', async () => {
    const agentId = await agentOn(withBroken);
    const url = peer.url('/fees/b');
    const r = await postSign(withBroken.url, withBroken.bootstrap.api_key, { agent_id: agentId, type: 'mpp', payload: { resource_url: url } });
    expect(r.status, r.text).toBe(200);
    const tx = signedTempoTx(r.json.payment_header.value);
    expect(tx.gas).toBe(400_000n);
    expect(tx.maxFeePerGas).toBe(40_000_000_000n);
    expect(tx.maxPriorityFeePerGas).toBe(2_000_000_000n);
    expect(withBroken.logs.some((l) => l.includes('Tempo fee estimate failed'))).toBe(true);
  });
});
