import http from 'node:http';

/**
 * An unauthenticated dashboard sign-in flood for `npm run bench`: CONNECTIONS loops, each posting
 * the sign-in form with a random email as fast as the server answers, each from its own loopback
 * address (127.0.1.x) so no per-address lockout stops it, as from a botnet: every attempt the
 * hashing queue admits costs a full scrypt. Prints `flooding` once every loop has had an answer;
 * when stdin closes, stops and prints `result {total, byStatus}`.
 */
const [base, connectionsArg] = process.argv.slice(2) as [string, string];
const connections = Number(connectionsArg);

const page = await fetch(`${base}/dashboard/sign-in`);
const cookie = page.headers.getSetCookie().find((c) => c.startsWith('pp_signin='))!.split(';')[0]!;
const token = /name="_csrf" value="([^"]+)"/.exec(await page.text())![1]!;
const url = new URL('/dashboard/sign-in', base);
const byStatus = new Map<number, number>();
let total = 0;
let stopped = false;
let answered = 0;

function post(agent: http.Agent): Promise<number> {
  const body = new URLSearchParams({ _csrf: token, email: `${Math.random().toString(36).slice(2)}@flood.example`, password: 'not the password' }).toString();
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST', agent,
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const loops = Array.from({ length: connections }, async (_, i) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1, localAddress: `127.0.1.${i + 1}` });
  let first = true;
  while (!stopped) {
    const status = await post(agent);
    total++;
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    if (first && ++answered === connections) process.stdout.write('flooding\n');
    first = false;
  }
  agent.destroy();
});

process.stdin.resume();
process.stdin.on('end', () => {
  stopped = true;
  void Promise.all(loops).then(() => {
    process.stdout.write(`result ${JSON.stringify({ total, byStatus: [...byStatus].sort(([a], [b]) => a - b) })}\n`);
    process.exit(0);
  });
});
