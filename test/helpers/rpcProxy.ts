import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One JSON-RPC call as the proxy sees it, and how to pass it on to the node. */
export type RpcCall = { msg: { id: unknown; method: string }; body: string; forward: () => Promise<unknown> };

/**
 * A JSON-RPC proxy in front of a test chain: each call goes through `answer`, which may reply
 * itself or `forward()` to the node. A forward that fails (the node closed a kept-alive socket, or
 * is already stopped at teardown) is answered 502, as a real proxy would: paypolicy then sees a
 * node error and retries, and the test process never holds an unhandled rejection, which vitest
 * counts as a failed run even when every test passed.
 */
export async function startRpcProxy(target: string, answer: (call: RpcCall) => Promise<unknown>): Promise<{ url: string; close(): Promise<void> }> {
  const forwardBody = async (body: string) => (await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).json();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      (async () => {
        const msg = JSON.parse(body) as RpcCall['msg'];
        return answer({ msg, body, forward: () => forwardBody(body) });
      })().then(
        (reply) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(reply));
        },
        (err: unknown) => {
          res.writeHead(502, { 'content-type': 'text/plain' });
          res.end(`proxy: ${(err as Error).message}`);
        },
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
