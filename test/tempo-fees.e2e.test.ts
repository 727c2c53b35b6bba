import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { getAddress } from 'viem';
import { adminFor, createAgent, type Admin } from './helpers/admin.js';
import { postSign, setPolicy } from './helpers/payments.js';
import { MPP_RECIPIENT, startMppPeer, type MppPeer } from './helpers/peers.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { signedTempoTx, startTempoRpc, type TempoRpc } from './helpers/tempoRpc.js';

const TEMPO_TESTNET = 42431;
const GOOD = { eth_chainId: '0xa5bf', eth_gasPrice: '0x4a817c800', eth_maxPriorityFeePerGas: '0x3b9aca00', eth_estimateGas: '0xc350' };

describe('MPP gas and fees from PAYPOLICY_TEMPO_RPC_URL or the --rpc-url entry of the Tempo chain', () => {
  let peer: MppPeer;
  let rpc: TempoRpc;
  let broken: TempoRpc;
  let registryRpc: TempoRpc;
  let preferredRpc: TempoRpc;
  let aliasRpc: TempoRpc;
  let s: TestServer;
  let withBroken: TestServer;
  let viaRegistry: TestServer;
  let withBoth: TestServer;
  let admin: Admin;

  beforeAll(async () => {
    peer = await startMppPeer();
    rpc = await startTempoRpc(GOOD);
    broken = await startTempoRpc({ eth_chainId: '0xa5bf' });
    registryRpc = await startTempoRpc(GOOD);
    // When both settings are given, the --rpc-url entry is the chain's endpoint; the alias node would give other prices.
    preferredRpc = await startTempoRpc(GOOD);
    aliasRpc = await startTempoRpc({ ...GOOD, eth_gasPrice: '0x1', eth_estimateGas: '0x1' });
    [s, withBroken, viaRegistry, withBoth] = await Promise.all([
      startTestServer({ dev: true, probeAllowHosts: [peer.host], tempoRpcUrl: rpc.url }),
      startTestServer({ dev: true, probeAllowHosts: [peer.host], tempoRpcUrl: broken.url }),
      startTestServer({ dev: true, probeAllowHosts: [peer.host], rpcUrls: new Map([[TEMPO_TESTNET, registryRpc.url]]) }),
      startTestServer({ dev: true, probeAllowHosts: [peer.host], tempoRpcUrl: aliasRpc.url, rpcUrls: new Map([[TEMPO_TESTNET, preferredRpc.url]]) }),
    ]);
    admin = adminFor(s);
  });
  afterAll(async () => {
    await Promise.all([s?.close(), withBroken?.close(), viaRegistry?.close(), withBoth?.close()]);
    await Promise.all([peer?.close(), rpc?.close(), broken?.close(), registryRpc?.close(), preferredRpc?.close(), aliasRpc?.close()]);
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

  test('behavior: configured through --rpc-url for the Tempo chain (no Tempo setting), the estimate comes from that endpoint', async () => {
    const agentId = await agentOn(viaRegistry);
    const url = peer.url('/fees/c');
    const r = await postSign(viaRegistry.url, viaRegistry.bootstrap.api_key, { agent_id: agentId, type: 'mpp', payload: { resource_url: url } });
    expect(r.status, r.text).toBe(200);
    const tx = signedTempoTx(r.json.payment_header.value);
    expect(tx).toMatchObject({ gas: 55_000n, maxFeePerGas: 40_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n });
    expect(registryRpc.calls.map((c) => c.method)).toEqual(expect.arrayContaining(['eth_chainId', 'eth_estimateGas', 'eth_gasPrice', 'eth_maxPriorityFeePerGas']));
    const paid = await fetch(url, { headers: { accept: 'application/json', [r.json.payment_header.name]: r.json.payment_header.value } });
    expect(paid.status, await paid.clone().text()).toBe(200);
  });

  test('behavior: with both settings, the --rpc-url entry for the chain wins over PAYPOLICY_TEMPO_RPC_URL', async () => {
    const agentId = await agentOn(withBoth);
    const r = await postSign(withBoth.url, withBoth.bootstrap.api_key, { agent_id: agentId, type: 'mpp', payload: { resource_url: peer.url('/fees/d') } });
    expect(r.status, r.text).toBe(200);
    expect(signedTempoTx(r.json.payment_header.value)).toMatchObject({ gas: 55_000n, maxFeePerGas: 40_000_000_000n });
    expect(preferredRpc.calls.some((c) => c.method === 'eth_estimateGas')).toBe(true);
    // (/readyz still probes the alias node with eth_chainId; no fee question goes there.)
    expect(aliasRpc.calls.filter((c) => c.method !== 'eth_chainId')).toEqual([]);
  });
});
