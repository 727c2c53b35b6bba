import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The overload phase of `npm run bench` (BENCH_ONLY=flood2k): FLOOD_CONNECTIONS (2,000) keep-alive
 * loopback connections send POST /api/sign back to back for FLOOD_SECONDS (16 s), ignoring
 * Retry-After and reconnecting when told `Connection: close`, while a separate process opens a new
 * connection for /healthz and /readyz every 50 ms. Prints admitted (200) and refused (503) latency,
 * the health checks' worst answer and the server's RSS, then `result {json}`. Latency is shown
 * twice: from when the request was sent, and from when the client was allowed to send it (its
 * previous 503's Retry-After over), which is what a client that waits as told sees.
 *
 *   node dist/bench/flood2k.js [path/to/bin/paypolicy.js] [extra serve args…]
 *   node dist/bench/flood2k.js --probe <url> <seconds>   (the health-check process)
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';
const root = fileURLToPath(new URL('../..', import.meta.url));

type Stats = { n: number; p50: number; p99: number; max: number };

function stats(values: number[]): Stats {
  const s = [...values].sort((a, b) => a - b);
  const at = (p: number) => (s.length === 0 ? NaN : Math.round(s[Math.min(s.length - 1, Math.floor(s.length * p))]! * 10) / 10);
  return { n: s.length, p50: at(0.5), p99: at(0.99), max: at(1) };
}

/** The health-check process: one new connection per check, so a full accept queue shows up here. */
async function probe(url: string, seconds: number): Promise<void> {
  const end = Date.now() + seconds * 1000;
  const started = performance.now();
  const times: Record<string, number[]> = { '/healthz': [], '/readyz': [] };
  const worst: Record<string, { ms: number; at: number }> = { '/healthz': { ms: 0, at: 0 }, '/readyz': { ms: 0, at: 0 } };
  const failures: Record<string, number> = { '/healthz': 0, '/readyz': 0 };
  while (Date.now() < end) {
    for (const path of Object.keys(times)) {
      const t0 = performance.now();
      try {
        const r = await fetch(url + path, { headers: { connection: 'close' } });
        await r.text();
        if (r.status !== 200) failures[path]!++;
      } catch {
        failures[path]!++;
      }
      const ms = performance.now() - t0;
      times[path]!.push(ms);
      if (ms > worst[path]!.ms) worst[path] = { ms, at: Math.round((t0 - started) / 100) / 10 };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  process.stdout.write(`probe ${JSON.stringify({ healthz: { ...stats(times['/healthz']!), failed: failures['/healthz'], worstSentAtS: worst['/healthz']!.at }, readyz: { ...stats(times['/readyz']!), failed: failures['/readyz'], worstSentAtS: worst['/readyz']!.at } })}\n`);
}

async function flood(launcher: string, serveArgs: string[]): Promise<void> {
  const connections = Number(process.env.FLOOD_CONNECTIONS ?? 2000);
  const seconds = Math.min(20, Number(process.env.FLOOD_SECONDS ?? 16));
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-flood-'));
  const server = spawn(process.execPath, [launcher, 'serve', '--port', '0', '--data-dir', join(dir, 'data'), '--log-level', 'warn', ...serveArgs], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    let out = '';
    const url = await new Promise<string>((resolve, reject) => {
      server.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      server.once('exit', (code) => reject(new Error(`server exited (${code}):\n${out}`)));
    });
    server.stdout.resume();
    const port = Number(new URL(url).port);
    const boot = JSON.parse(readFileSync(join(dir, 'data', 'bootstrap.json'), 'utf8')) as { admin_token: string; agent_id: string; api_key: string };
    const policy = await fetch(`${url}/paypolicy.v1.AdminService/SetPolicy`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${boot.admin_token}` },
      body: JSON.stringify({ agentId: boot.agent_id, allowlist: [RECIPIENT], spendCapUsd: '1000000', approvalThresholdUsd: '1000000' }),
    });
    if (policy.status !== 200) throw new Error(`SetPolicy answered ${policy.status}`);
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))![1]) / 1024;
    const rssStart = rss();
    let rssMax = rssStart;
    const rssTimer = setInterval(() => (rssMax = Math.max(rssMax, rss())), 200);

    const checker = spawn(process.execPath, [fileURLToPath(import.meta.url), '--probe', url, String(seconds)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let checkerOut = '';
    checker.stdout.on('data', (d: Buffer) => (checkerOut += d.toString()));
    const checked = new Promise((r) => checker.once('exit', r));

    const latency: Record<number, number[]> = {};
    const told: Record<number, number[]> = {};
    let seq = 0;
    let connects = 0;
    let socketErrors = 0;
    let noRetryAfter = 0;
    const body = JSON.stringify({ agent_id: boot.agent_id, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.000001' });
    const request = (i: number) => `POST /api/sign HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${boot.api_key}\r\ncontent-type: application/json\r\n` +
      `idempotency-key: flood-${i}-${seq++}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const end = Date.now() + seconds * 1000;

    /** One client: a connection at a time, a request at a time, reconnecting when the server closes. */
    const client = async (i: number) => {
      while (Date.now() < end) {
        await new Promise<void>((resolve) => {
          const socket = net.connect(port, '127.0.0.1');
          let buf = '';
          let t0 = 0;
          let allowedAt = 0;
          const send = () => {
            if (Date.now() >= end) return void socket.end();
            t0 = performance.now();
            socket.write(request(i));
          };
          socket.setEncoding('utf8');
          socket.on('connect', () => {
            connects++;
            send();
          });
          socket.on('data', (d: string) => {
            buf += d;
            for (;;) {
              const headEnd = buf.indexOf('\r\n\r\n');
              if (headEnd < 0) return;
              const head = buf.slice(0, headEnd);
              const len = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
              if (buf.length < headEnd + 4 + len) return;
              buf = buf.slice(headEnd + 4 + len);
              const status = Number(head.slice(9, 12));
              const now = performance.now();
              (latency[status] ??= []).push(now - t0);
              // An answer that came before the Retry-After was over waited nothing from it.
              (told[status] ??= []).push(Math.max(0, now - Math.max(t0, allowedAt)));
              const retryAfter = /retry-after: (\d+)/i.exec(head)?.[1];
              if (status === 503 && retryAfter === undefined) noRetryAfter++;
              allowedAt = status === 503 ? now + Number(retryAfter ?? 0) * 1000 : 0;
              if (/connection: close/i.test(head)) return void socket.end();
              send();
            }
          });
          socket.on('error', () => socketErrors++);
          socket.on('close', () => resolve());
        });
      }
    };
    const started = Date.now();
    await Promise.all(Array.from({ length: connections }, (_, i) => client(i)));
    const elapsed = (Date.now() - started) / 1000;
    clearInterval(rssTimer);
    await checked;
    const checks = JSON.parse(/probe (.+)/.exec(checkerOut)?.[1] ?? '{}') as Record<string, Stats & { failed: number; worstSentAtS: number }>;
    const byStatus = Object.fromEntries(Object.entries(latency).map(([k, v]) => [k, v.length]));
    const result = {
      connections, seconds: Math.round(elapsed * 10) / 10, byStatus, connects, socketErrors, noRetryAfter,
      admitted: stats(latency[200] ?? []), refused: stats(latency[503] ?? []),
      admittedFromRetryAfter: stats(told[200] ?? []), refusedFromRetryAfter: stats(told[503] ?? []),
      healthz: checks.healthz, readyz: checks.readyz,
      rssMb: { start: Math.round(rssStart), max: Math.round(rssMax), end: Math.round(rss()) },
    };
    const after = await fetch(`${url}/api/sign`, { method: 'POST', headers: { authorization: `Bearer ${boot.api_key}`, 'content-type': 'application/json', 'idempotency-key': 'after-flood' }, body });
    const line = (name: string, s: Stats | undefined) => (s ? `${name}: n=${s.n} p50 ${s.p50} p99 ${s.p99} max ${s.max} ms` : `${name}: -`);
    process.stdout.write([
      `${connections} connections, ${result.seconds} s: answers ${JSON.stringify(byStatus)}, ${connects} connects, ${socketErrors} socket errors, ${noRetryAfter} 503s without Retry-After`,
      `  ${line('admitted (200), from send', result.admitted)}`,
      `  ${line('refused (503), from send', result.refused)}`,
      `  ${line('admitted (200), from Retry-After', result.admittedFromRetryAfter)}`,
      `  ${line('refused (503), from Retry-After', result.refusedFromRetryAfter)}`,
      `  ${line('/healthz (new connection each)', checks.healthz)}${checks.healthz ? `, ${checks.healthz.failed} failed, slowest sent ${checks.healthz.worstSentAtS} s in` : ''}`,
      `  ${line('/readyz (new connection each)', checks.readyz)}${checks.readyz ? `, ${checks.readyz.failed} failed, slowest sent ${checks.readyz.worstSentAtS} s in` : ''}`,
      `  server RSS ${result.rssMb.start} MB at start, max ${result.rssMb.max} MB, ${result.rssMb.end} MB after; first sign after the flood: ${after.status}`,
      `result ${JSON.stringify({ ...result, after: after.status })}`,
    ].join('\n') + '\n');
  } finally {
    if (server.exitCode === null) {
      const exited = new Promise((r) => server.once('exit', r));
      server.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
if (args[0] === '--probe') await probe(args[1]!, Number(args[2]));
else await flood(args[0] ?? join(root, 'bin/paypolicy.js'), args.slice(1));
