#!/usr/bin/env node
// Smoke test of the single executable (dist/paypolicy, from `npm run build:binary`), run by CI.
// The executable runs from an empty temp folder as an unprivileged user (nobody, when this runs
// as root), with a clean environment whose PATH holds no node, and no node_modules anywhere
// near it. This script itself runs with node, as the client: it starts the server on an empty
// data directory (bootstrap), pings, signs (and recovers the signature with viem), has a
// payment approved through the executable's own CLI, stops, restarts, and replays both payments.
// Exits non-zero on the first failure. Prints the size and the start-up time to listening.
import { execFileSync, spawn } from 'node:child_process';
import { chownSync, copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { recoverTypedDataAddress } from 'viem';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const built = join(root, 'dist/paypolicy');
const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';
const started = Date.now();
let passed = 0;

function fail(message) {
  process.stderr.write(`smoke-binary: FAIL: ${message}\n`);
  process.exit(1);
}
function check(ok, message) {
  if (!ok) fail(message);
  passed++;
}

if (!existsSync(built)) fail(`${built} is missing; run \`npm run build:binary\` first`);

// A failed injection leaves plain node, which exits 0 and prints nothing: ask the executable.
const info = JSON.parse(execFileSync(built, ['version', '--json'], { env: {}, encoding: 'utf8' }));
check(info.singleExecutable === true, `not a single executable: ${JSON.stringify(info)}`);

// Only system libraries: nothing from node_modules or a node install.
const libs = execFileSync('ldd', [built], { encoding: 'utf8' }).split('\n').filter((l) => l.trim() !== '');
const unexpected = libs.filter((l) => !/linux-vdso|ld-linux|lib(c|m|dl|pthread|stdc\+\+|gcc_s|rt)\.so/.test(l));
check(unexpected.length === 0, `unexpected shared libraries: ${unexpected.join('; ')}`);

// An empty folder owned by the unprivileged user, holding only the executable.
const asRoot = process.getuid() === 0;
const work = mkdtempSync(join(tmpdir(), 'paypolicy-smoke-'));
const exe = join(work, 'paypolicy');
copyFileSync(built, exe);
const ids = asRoot ? { uid: Number(execFileSync('id', ['-u', 'nobody'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'nobody'], { encoding: 'utf8' })) } : undefined;
if (ids) {
  chownSync(work, ids.uid, ids.gid);
  chownSync(exe, ids.uid, ids.gid);
}
const dataDir = join(work, 'data');
/** Runs the executable as that user, in that folder, with nothing inherited from this environment. */
function runExe(args) {
  const env = { PATH: '/nonexistent', HOME: work, TMPDIR: work };
  const [cmd, argv] = ids ? ['/usr/bin/setpriv', ['--reuid', String(ids.uid), '--regid', String(ids.gid), '--clear-groups', exe, ...args]] : [exe, args];
  return spawn(cmd, argv, { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
}

let server;
process.on('exit', () => {
  if (server && server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

/** Starts `serve --port 0`; resolves with its URL and the time from spawn to the listening line. */
function startServer() {
  const t0 = process.hrtime.bigint();
  const child = runExe(['serve', '--port', '0', '--data-dir', dataDir]);
  server = child;
  let out = '';
  let err = '';
  const exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  const url = new Promise((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (d) => {
      out += d;
      const m = /(?:listening on |curl -s -X POST )(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.stderr.setEncoding('utf8').on('data', (d) => (err += d));
    void exited.then(({ code, signal }) => reject(new Error(`exited (${code ?? signal}) before listening\nstdout: ${out}\nstderr: ${err}`)));
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return url.then(
    (u) => {
      clearTimeout(timer);
      return { url: u, ms: Number(process.hrtime.bigint() - t0) / 1e6, exited, output: () => ({ out, err }) };
    },
    (e) => fail(e.message),
  );
}

/** Runs the executable's admin CLI against the server (admin token from bootstrap.json). */
function cli(url, args) {
  return new Promise((resolve) => {
    const child = runExe([...args, '--url', url, '--data-dir', dataDir]);
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (err += d));
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

async function api(url, method, path, key, body, idempotencyKey) {
  const headers = { authorization: `Bearer ${key}`, connection: 'close' };
  if (body) headers['content-type'] = 'application/json';
  if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
  const res = await fetch(`${url}${path}`, { method, headers, body: body ? JSON.stringify(body) : undefined });
  return { status: res.status, json: await res.json() };
}

async function signer(signature, a) {
  return recoverTypedDataAddress({
    domain: { name: a.domain_name, version: a.domain_version, chainId: a.chain_id, verifyingContract: a.token },
    types: {
      TransferWithAuthorization: [
        { name: 'from', type: 'address' }, { name: 'to', type: 'address' }, { name: 'value', type: 'uint256' },
        { name: 'validAfter', type: 'uint256' }, { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' },
      ],
    },
    primaryType: 'TransferWithAuthorization',
    message: { from: a.from, to: a.to, value: BigInt(a.value), validAfter: BigInt(a.valid_after), validBefore: BigInt(a.valid_before), nonce: a.nonce },
    signature,
  });
}

async function stop(s) {
  server.kill('SIGTERM');
  const { code, signal } = await s.exited;
  check(code === 0, `exit ${code ?? signal} after SIGTERM; stderr: ${s.output().err}`);
  check(s.output().err === '', `stderr not empty: ${s.output().err}`);
}

// 1. First start on an empty data directory: bootstrap.
const first = await startServer();
const boot = JSON.parse(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8'));
check(/^ak_test_/.test(boot.api_key) && /^0x[0-9a-fA-F]{40}$/.test(boot.treasury_address), 'bootstrap.json');
if (ids) check(statSync(join(dataDir, 'paypolicy.db')).uid === ids.uid, 'the database belongs to the unprivileged user');
// One copy of each native addon in the process, shared by every thread: two copies of SQLite in
// one process would each keep their own table of POSIX locks on the same database files.
const mapped = new Set(readFileSync(`/proc/${server.pid}/maps`, 'utf8').split('\n').map((l) => /(\S+\.node)( \(deleted\))?$/.exec(l)?.[1]).filter(Boolean));
for (const addon of ['better_sqlite3.node', 'secp256k1.node']) {
  const copies = [...mapped].filter((p) => p.endsWith(`/${addon}`));
  check(copies.length === 1, `${addon} is mapped from ${copies.length} files (want 1): ${copies.join(', ')}`);
}
const dashboardJs = await fetch(`${first.url}/dashboard/static/dashboard.js`, { headers: { connection: 'close' } });
check(dashboardJs.status === 200 && (await dashboardJs.text()).length > 0, 'the dashboard script is served');

// 2. Ping.
const ping = await api(first.url, 'POST', '/api/ping', boot.api_key, { agent_id: boot.agent_id });
check(ping.status === 200 && ping.json.ok === true, `ping: ${JSON.stringify(ping)}`);

// 3. Policy through the executable's own CLI; sign $0.50 and recover the signer.
const policy = await cli(first.url, ['policy', 'set', '--agent', boot.agent_id, '--allow', RECIPIENT, '--cap', '10', '--threshold', '1']);
check(policy.code === 0, `policy set: ${policy.err}`);
const small = { agent_id: boot.agent_id, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 0.5 };
const signed = await api(first.url, 'POST', '/api/sign', boot.api_key, small, 'smoke-small');
check(signed.status === 200 && typeof signed.json.signature === 'string', `sign: ${JSON.stringify(signed)}`);
check((await signer(signed.json.signature, signed.json.authorization)).toLowerCase() === boot.treasury_address.toLowerCase(), 'the signature recovers to the treasury');

// 4. $5 needs an approval: decided through the executable's CLI, then collected.
const big = { ...small, amount_usd: 5 };
const pending = await api(first.url, 'POST', '/api/sign', boot.api_key, big, 'smoke-big');
check(pending.status === 202 && typeof pending.json.approval_request_id === 'string', `pending: ${JSON.stringify(pending)}`);
const decided = await cli(first.url, ['approval', 'decide', '--id', pending.json.approval_request_id, '--approve', '--by', 'smoke']);
check(decided.code === 0, `approval decide: ${decided.err}`);
const collected = await api(first.url, 'POST', '/api/sign', boot.api_key, big, 'smoke-big');
check(collected.status === 200 && (await signer(collected.json.signature, collected.json.authorization)).toLowerCase() === boot.treasury_address.toLowerCase(), `approved payment: ${JSON.stringify(collected)}`);

// 5. Stop; nothing unpacked is left behind.
await stop(first);
check(!readdirSync(work).some((f) => f.startsWith('paypolicy-native-')), 'unpacked native addons left in TMPDIR');

// 6. Restart on the same data: no new secrets; both payments replay with the same signatures.
const second = await startServer();
check(second.output().out.includes('paypolicy listening on') && !second.output().out.includes(boot.api_key), 'a restart prints no secret');
for (const [body, key, expected] of [[small, 'smoke-small', signed], [big, 'smoke-big', collected]]) {
  const replay = await api(second.url, 'POST', '/api/sign', boot.api_key, body, key);
  check(replay.status === 200 && replay.json.signature === expected.json.signature && replay.json.idempotent === true, `replay ${key}: ${JSON.stringify(replay)}`);
}
await stop(second);

const mib = (statSync(built).size / 1024 / 1024).toFixed(1);
process.stdout.write(
  `smoke-binary: ${passed} checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s; ${mib} MiB; ` +
  `start to listening ${first.ms.toFixed(0)} ms (first start, bootstrap) and ${second.ms.toFixed(0)} ms (restart)` +
  `${ids ? '; ran as nobody' : ''}\n`,
);
