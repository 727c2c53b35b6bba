import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Transaction } from 'viem/tempo';

export type TempoRpc = { url: string; calls: Array<{ method: string; params: unknown[] }>; close: () => Promise<void> };

/** A Tempo JSON-RPC node on loopback answering the fee questions with fixed values, recording calls. */
export async function startTempoRpc(answers: Record<string, unknown>): Promise<TempoRpc> {
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

/** The Tempo transaction inside an MPP `Payment` credential header value. */
export function signedTempoTx(paymentHeaderValue: string): { gas: bigint; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } {
  const credential = JSON.parse(Buffer.from(paymentHeaderValue.slice('Payment '.length), 'base64url').toString('utf8')) as { payload: { signature: `0x${string}` } };
  return Transaction.deserialize(credential.payload.signature) as unknown as { gas: bigint; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };
}
