import http from 'node:http';

/**
 * Baseline for the benchmark: the least a Node HTTP JSON endpoint can do (read the body, parse
 * it, answer JSON). Run in its own process so it is measured under the same load generator.
 */
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    const payload = JSON.stringify({ ok: true, agent_id: body.agent_id ?? null });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
    res.end(payload);
  });
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`listening ${port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
