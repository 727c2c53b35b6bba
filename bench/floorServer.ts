import { randomBytes, randomUUID } from 'node:crypto';
import { fdatasync, mkdtempSync, openSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import secp256k1 from 'secp256k1';
import { bytesToHex, getAddress, keccak256, type Address, type Hex } from 'viem';
import { eip3009Digest, type Eip3009Domain } from '../src/signing/typedData.js';

/**
 * The floor of the bench: the least a *correct* durable sign server can do on this
 * machine, measured in the same run as paypolicy so every report can say what fraction of it
 * paypolicy reaches. Correct means what paypolicy promises, minus everything else paypolicy does
 * (auth, logging, metrics, idempotency, approvals, the state machine, admission):
 *
 * - node:http, the body read and JSON-parsed, the amount parsed to integer micro-units;
 * - the policy in memory: recipient allowlist and a per-agent rolling 24 h cap, exact, with the
 *   amount reserved before signing so concurrent payments cannot pass the cap together;
 * - the EIP-3009 digest built on the main thread (paypolicy's own hand-written encoder);
 * - one worker thread signs with libsecp256k1 and recovers every signature, comparing the
 *   recovered public key with the treasury's, before it leaves the thread;
 * - one SQLite row per payment, commits grouped per event-loop turn, and the WAL fdatasync'ed on
 *   libuv's pool before any answer that rests on it.
 *
 * Run: `node dist/bench/floorServer.js [dataDir]`; prints `listening <port>`.
 */

type Job = { digest: Uint8Array; resolve: (sig: Uint8Array) => void; reject: (e: Error) => void };

const USDC_BASE: Address = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const DOMAIN: Eip3009Domain = { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: USDC_BASE };
const ALLOWED = new Set(['0x2096abcdef0123456789abcdef0123456789287c']);
const CAP_MICROS = 1_000_000_000n * 1_000_000n;
const WINDOW_MS = 24 * 3600 * 1000;

if (isMainThread) await main();
else signerThread();

function signerThread(): void {
  let secret: Uint8Array | undefined;
  let pub: Uint8Array | undefined;
  parentPort!.on('message', (msg: { key: Uint8Array } | { digests: Uint8Array }) => {
    if ('key' in msg) {
      secret = msg.key;
      pub = secp256k1.publicKeyCreate(secret, false);
      return;
    }
    // One transferable buffer per batch both ways: 32-byte digests in, 65-byte r‖s‖v out.
    const n = msg.digests.length / 32;
    const out = new Uint8Array(n * 65);
    for (let i = 0; i < n; i++) {
      const digest = msg.digests.subarray(i * 32, i * 32 + 32);
      const { signature, recid } = secp256k1.ecdsaSign(digest, secret!);
      const recovered = secp256k1.ecdsaRecover(signature, recid, digest, false);
      if (!Buffer.from(recovered).equals(Buffer.from(pub!))) throw new Error('signature does not recover to the treasury');
      out.set(signature, i * 65);
      out[i * 65 + 64] = 27 + recid;
    }
    parentPort!.postMessage(out, [out.buffer]);
  });
}

async function main(): Promise<void> {
  const ownDir = process.argv[2] === undefined;
  const dir = process.argv[2] ?? mkdtempSync(join(tmpdir(), 'paypolicy-floor-'));
  const db = new Database(join(dir, 'floor.db'));
  db.pragma('journal_mode = WAL');
  // NORMAL: a commit does not sync; the fdatasync of the WAL below does, off the event loop.
  db.pragma('synchronous = NORMAL');
  db.exec(`CREATE TABLE IF NOT EXISTS payments (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, recipient TEXT NOT NULL,
    amount_micros INTEGER NOT NULL, signature TEXT NOT NULL, created_at INTEGER NOT NULL) STRICT`);
  const insert = db.prepare('INSERT INTO payments VALUES (?, ?, ?, ?, ?, ?)');
  const begin = db.prepare('BEGIN');
  const commit = db.prepare('COMMIT');

  const treasuryKey = randomBytes(32);
  const treasury = getAddress(bytesToHex(keccak256(secp256k1.publicKeyCreate(treasuryKey, false).subarray(1), 'bytes').subarray(12)));
  const worker = new Worker(new URL(import.meta.url));
  worker.postMessage({ key: treasuryKey });

  // Signing: jobs of one event-loop turn go to the thread as one message, answered in order.
  let batch: Job[] = [];
  const inFlight: Job[][] = [];
  worker.on('message', (sigs: Uint8Array) => {
    const jobs = inFlight.shift()!;
    for (let i = 0; i < jobs.length; i++) jobs[i]!.resolve(sigs.subarray(i * 65, i * 65 + 65));
  });
  worker.on('error', (err) => {
    for (const jobs of inFlight.splice(0)) for (const j of jobs) j.reject(err);
  });
  const sign = (digest: Uint8Array) => new Promise<Uint8Array>((resolve, reject) => {
    if (batch.push({ digest, resolve, reject }) === 1) setImmediate(flushSigns);
  });
  function flushSigns(): void {
    const jobs = batch;
    batch = [];
    const buf = new Uint8Array(jobs.length * 32);
    jobs.forEach((j, i) => buf.set(j.digest, i * 32));
    inFlight.push(jobs);
    worker.postMessage({ digests: buf }, [buf.buffer]);
  }

  // Durability: rows of one turn in one transaction; answered after an fdatasync of the WAL that
  // started after their commit (syncs never overlap; commits meanwhile share the next one).
  let rows: Array<{ row: unknown[]; done: () => void }> = [];
  let waiting: Array<() => void> = [];
  let syncing = false;
  let walFd: number | undefined;
  const persist = (row: unknown[]) => new Promise<void>((done) => {
    if (rows.push({ row, done }) === 1) setImmediate(flushRows);
  });
  function flushRows(): void {
    const turn = rows;
    rows = [];
    begin.run();
    for (const r of turn) insert.run(...r.row);
    commit.run();
    for (const r of turn) waiting.push(r.done);
    kickSync();
  }
  function kickSync(): void {
    if (syncing || waiting.length === 0) return;
    syncing = true;
    const covered = waiting;
    waiting = [];
    walFd ??= openSync(join(dir, 'floor.db-wal'), 'r+');
    fdatasync(walFd, (err) => {
      if (err) throw err;
      syncing = false;
      for (const done of covered) done();
      kickSync();
    });
  }

  // Policy: per agent, the amounts inside the rolling window (oldest first) and their sum.
  const spent = new Map<string, { sum: bigint; entries: Array<{ at: number; micros: bigint }> }>();
  function reserve(agentId: string, micros: bigint, now: number): boolean {
    let s = spent.get(agentId);
    if (!s) spent.set(agentId, (s = { sum: 0n, entries: [] }));
    while (s.entries.length > 0 && s.entries[0]!.at <= now - WINDOW_MS) s.sum -= s.entries.shift()!.micros;
    if (s.sum + micros > CAP_MICROS) return false;
    s.sum += micros;
    s.entries.push({ at: now, micros });
    return true;
  }
  function release(agentId: string, micros: bigint): void {
    const s = spent.get(agentId)!;
    const i = s.entries.findIndex((e) => e.micros === micros);
    if (i >= 0) {
      s.sum -= micros;
      s.entries.splice(i, 1);
    }
  }

  const reply = (res: http.ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };

  async function handle(body: Record<string, unknown>, res: http.ServerResponse): Promise<void> {
    const { agent_id: agentId, recipient_address: to, amount_usd: amount } = body;
    if (typeof agentId !== 'string' || typeof to !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(to)) return reply(res, 400, { error: 'bad request' });
    const m = typeof amount === 'number' || typeof amount === 'string' ? /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(String(amount)) : null;
    if (!m) return reply(res, 400, { error: 'bad amount' });
    const micros = BigInt(m[1]!) * 1_000_000n + BigInt((m[2] ?? '').padEnd(6, '0'));
    if (!ALLOWED.has(to.toLowerCase())) return reply(res, 200, { status: 'denied', reason: 'recipient not allowed' });
    const now = Date.now();
    if (!reserve(agentId, micros, now)) return reply(res, 200, { status: 'denied', reason: 'cap' });
    try {
      const validBefore = BigInt(Math.floor(now / 1000) + 300);
      const message = { from: treasury, to: to as Address, value: micros, validAfter: 0n, validBefore, nonce: bytesToHex(randomBytes(32)) as Hex };
      const signature = bytesToHex(await sign(eip3009Digest(DOMAIN, message)));
      const id = `txn_${randomUUID()}`;
      await persist([id, agentId, to, Number(micros), signature, now]);
      reply(res, 200, {
        status: 'allowed', transaction_id: id, signature,
        authorization: { from: treasury, to, value: micros.toString(), valid_after: '0', valid_before: validBefore.toString(), nonce: message.nonce },
      });
    } catch (err) {
      release(agentId, micros);
      reply(res, 500, { error: (err as Error).message });
    }
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return reply(res, 400, { error: 'invalid JSON' });
      }
      if (typeof body !== 'object' || body === null) return reply(res, 400, { error: 'invalid JSON' });
      void handle(body as Record<string, unknown>, res);
    });
  });
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as { port: number };
    process.stdout.write(`listening ${port}\n`);
  });
  process.on('SIGTERM', () => {
    server.close();
    server.closeAllConnections();
    void worker.terminate().then(() => {
      db.close();
      if (ownDir) rmSync(dir, { recursive: true, force: true });
      process.exit(0);
    });
  });
}
