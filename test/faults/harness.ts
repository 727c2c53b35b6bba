import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readdirSync, readFileSync, renameSync, rmSync, truncateSync, writeFileSync, writeSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import type { BootstrapFile } from '../../src/bootstrap.js';
import { adminFor, type Admin } from '../helpers/admin.js';
import { CLI } from '../helpers/cli.js';
import { listAllTransactions, postSign, setPolicy } from '../helpers/payments.js';
import type { TestServer } from '../helpers/server.js';

/**
 * The fault harness: compiles test/faults/shim/faultfs.c with the machine's C compiler, runs the
 * real `paypolicy serve` with it preloaded on a temporary data directory, and turns faults on and
 * off through its control file. See the header of faultfs.c for what the shim can do.
 */

const SOURCE = fileURLToPath(new URL('./shim/faultfs.c', import.meta.url));
let built: string | undefined;

/** Builds the shim once per test process into a temporary directory; fails loudly without cc. */
export function buildShim(): string {
  if (built && existsSync(built)) return built;
  const out = join(mkdtempSync(join(tmpdir(), 'paypolicy-faultfs-')), 'faultfs.so');
  const cc = process.env.CC ?? 'cc';
  try {
    execFileSync(cc, ['-shared', '-fPIC', '-O2', '-Wall', '-Wno-nonnull-compare', '-fno-delete-null-pointer-checks', '-o', out, SOURCE, '-ldl', '-lpthread'], { stdio: 'pipe' });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    throw new Error(`the fault tests need a C compiler ("${cc}"): ${e.code === 'ENOENT' ? 'not found' : e.stderr?.toString() ?? e.message}`);
  }
  built = out;
  return out;
}

export type Ctl = {
  fsync?: 'ok' | 'eio' | 'noop';
  fsync_match?: string;
  fsync_delay_ms?: number;
  /** Delay only the syncs of paths ending with this (e.g. `paypolicy.db`, the database file alone). */
  fsync_delay_match?: string;
  write?: 'ok' | 'enospc' | 'erofs' | 'eio';
  /** Fail only the writes of paths ending with this (e.g. `-shm`). */
  write_match?: string;
  clock_shift_ms?: number;
};

export type ServerProcess = {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

export type SpawnOptions = {
  dataDir: string;
  /** Extra `serve` arguments. */
  args?: string[];
  env?: Record<string, string>;
  /** Run under this umask (through /bin/sh), e.g. '000'. */
  umask?: string;
  /** LD_PRELOAD the fault shim with this state directory and control file. */
  shim?: { stateDir: string; ctlPath: string };
};

/** Spawns `node bin/paypolicy.js serve --port 0`; resolves with its URL, rejects if it exits first. */
export function spawnServer(opts: SpawnOptions): { process: Promise<ServerProcess>; child: ChildProcess; output: () => { stdout: string; stderr: string }; exited: ServerProcess['exited'] } {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PAYPOLICY_') && !k.startsWith('FAULTFS_') && k !== 'LD_PRELOAD') env[k] = v;
  // A wide signing-queue deadline, as test servers have: these files share the machine's cores with
  // others, and a payment that waits a second for one is not what a fault test asks about.
  Object.assign(env, { PAYPOLICY_LOG_LEVEL: 'warn', PAYPOLICY_SIGNER_THREADS: '1', PAYPOLICY_MAX_QUEUE_MS: '60000', ...opts.env });
  if (opts.shim) {
    Object.assign(env, {
      LD_PRELOAD: buildShim(), FAULTFS_DIR: opts.dataDir, FAULTFS_STATE: opts.shim.stateDir, FAULTFS_CTL: opts.shim.ctlPath,
      // libuv must use the thread pool (plain libc calls) for file I/O, not io_uring.
      UV_USE_IO_URING: '0',
    });
  }
  const argv = [CLI, 'serve', '--port', '0', '--data-dir', opts.dataDir, ...(opts.args ?? [])];
  const child = opts.umask
    ? spawn('/bin/sh', ['-c', `umask ${opts.umask} && exec "$0" "$@"`, process.execPath, ...argv], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  const started = new Promise<ServerProcess>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /(?:listening on |curl -s -X POST )(http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve({ child, url: m[1]!, stdout: () => out, stderr: () => err, exited });
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    void exited.then(({ code, signal }) => reject(new Error(`paypolicy exited (${code ?? signal}) before listening\nstdout: ${out}\nstderr: ${err}`)));
  });
  started.catch(() => {});
  return { process: started, child, output: () => ({ stdout: out, stderr: err }), exited };
}

/**
 * Undoes every write the shim saw that no fsync/fdatasync covered, newest first: what a power cut
 * would leave of the files (the process must be dead). Files written by several processes (a
 * restart in the same boot, without a roll-back in between) are undone newest process first, and
 * an older process's unsynced bytes are not restored where a later process wrote and synced: the
 * disk holds those. Clears the undo state.
 */
export function rollBackUnsynced(stateDir: string): { files: number; records: number } {
  const index = join(stateDir, 'index');
  if (!existsSync(index)) return { files: 0, records: 0 };
  const byPath = new Map<string, string[]>();
  for (const line of readFileSync(index, 'utf8').split('\n')) {
    if (line === '') continue;
    const [id, path] = line.split('\t') as [string, string];
    byPath.set(path, [...(byPath.get(path) ?? []), id]);
  }
  let files = 0;
  let records = 0;
  for (const [path, ids] of byPath) {
    // Ranges a later process wrote and synced, and the size at its latest sync.
    const laterSynced: Array<[number, number]> = [];
    let durableSize: number | undefined;
    for (const id of [...ids].reverse()) {
      const recs = undoRecords(join(stateDir, `${id}.undo`));
      if (recs.length > 0 && existsSync(path)) {
        files++;
        records += recs.length;
        const fd = openSync(path, 'r+');
        try {
          for (const r of recs.reverse()) {
            for (const [from, to] of uncovered(r.off, r.off + r.old.length, laterSynced, durableSize)) {
              writeSync(fd, r.old, from - r.off, to - from, from);
            }
          }
        } finally {
          closeSync(fd);
        }
        if (durableSize === undefined) truncateSync(path, recs[recs.length - 1]!.size);
      }
      const synced = join(stateDir, `${id}.synced`);
      if (!existsSync(synced)) continue;
      const data = readFileSync(synced);
      let newestSize: number | undefined;
      for (let at = 0; at + 16 <= data.length; at += 16) {
        const off = data.readBigUInt64LE(at);
        const len = Number(data.readBigUInt64LE(at + 8));
        if (off === 0xffffffffffffffffn) newestSize = len;
        else laterSynced.push([Number(off), Number(off) + len]);
      }
      durableSize ??= newestSize;
    }
  }
  rmSync(stateDir, { recursive: true, force: true });
  mkdirSync(stateDir, { recursive: true });
  return { files, records };
}

type UndoRecord = { off: number; old: Buffer; size: number };

/** The records of one undo log (offset, saved length, size before, written length; saved bytes). */
function undoRecords(undo: string): UndoRecord[] {
  if (!existsSync(undo)) return [];
  const data = readFileSync(undo);
  const recs: UndoRecord[] = [];
  for (let at = 0; at + 32 <= data.length;) {
    const off = Number(data.readBigUInt64LE(at));
    const len = Number(data.readBigUInt64LE(at + 8));
    const size = Number(data.readBigUInt64LE(at + 16));
    // Killed while saving: the write it was saving for never happened.
    if (at + 32 + len > data.length) break;
    recs.push({ off, old: data.subarray(at + 32, at + 32 + len), size });
    at += 32 + len;
  }
  return recs;
}

/** The parts of [from, to) outside every covered range and below `limit`. */
function uncovered(from: number, to: number, covered: Array<[number, number]>, limit = Infinity): Array<[number, number]> {
  let parts: Array<[number, number]> = [[from, Math.min(to, limit)]];
  for (const [a, b] of covered) {
    parts = parts.flatMap(([x, y]): Array<[number, number]> => (b <= x || a >= y ? [[x, y]] : [[x, Math.min(y, a)], [Math.max(x, b), y]]));
  }
  return parts.filter(([x, y]) => y > x);
}

/** A data directory, its shim state and control file, and the server process running on them. */
export class FaultRig {
  readonly root = mkdtempSync(join(tmpdir(), 'paypolicy-faults-'));
  readonly dataDir = join(this.root, 'data');
  readonly stateDir = join(this.root, 'faultfs');
  readonly ctlPath = join(this.root, 'faultfs.ctl');
  server: ServerProcess | undefined;
  bootstrap!: BootstrapFile;
  admin!: Admin;

  constructor() {
    mkdirSync(this.stateDir);
    this.ctl({});
  }

  /** Replaces the control file atomically (the shim re-reads it within a millisecond). */
  ctl(values: Ctl): void {
    const text = Object.entries(values).map(([k, v]) => `${k}=${v}`).join('\n');
    writeFileSync(`${this.ctlPath}.tmp`, `${text}\n`);
    renameSync(`${this.ctlPath}.tmp`, this.ctlPath);
  }

  /** Starts the server with the shim preloaded (faults as the control file says). */
  async start(opts: { shim?: boolean; args?: string[]; env?: Record<string, string> } = {}): Promise<ServerProcess> {
    const spawned = spawnServer({ dataDir: this.dataDir, args: opts.args, env: opts.env, shim: opts.shim === false ? undefined : { stateDir: this.stateDir, ctlPath: this.ctlPath } });
    this.server = await spawned.process;
    this.bootstrap = JSON.parse(readFileSync(join(this.dataDir, 'bootstrap.json'), 'utf8')) as BootstrapFile;
    this.admin = adminFor({ url: this.server.url, bootstrap: this.bootstrap } as TestServer);
    return this.server;
  }

  /** kill -9, then keep only what was synced: a power cut. */
  async powerCut(): Promise<{ files: number; records: number }> {
    const s = this.server!;
    s.child.kill('SIGKILL');
    await s.exited;
    this.server = undefined;
    return rollBackUnsynced(this.stateDir);
  }

  /** SIGTERM and wait (a clean stop syncs everything; leftover undo records are dropped). */
  async stop(): Promise<void> {
    const s = this.server;
    if (!s) return;
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGTERM');
    await s.exited;
    this.server = undefined;
    rmSync(this.stateDir, { recursive: true, force: true });
    mkdirSync(this.stateDir, { recursive: true });
  }

  async dispose(): Promise<void> {
    if (this.server) {
      this.server.child.kill('SIGKILL');
      await this.server.exited;
    }
    rmSync(this.root, { recursive: true, force: true });
  }

  /** Sizes of the data directory's files, for messages. */
  files(): Record<string, number> {
    return Object.fromEntries(readdirSync(this.dataDir).map((f) => [f, statSync(join(this.dataDir, f)).size]));
  }
}

export const RECIPIENT = '0x1111111111111111111111111111111111111111';

/** Waits until the server's own wall clock (its HTTP Date header) shows the shift (clock_shift_ms). */
export async function serverWallShifted(url: string, shiftMs: number): Promise<void> {
  for (;;) {
    const res = await fetch(`${url}/healthz`, { headers: { connection: 'close' } });
    await res.text();
    const skew = Date.parse(res.headers.get('date') ?? '') - Date.now();
    if (Math.abs(skew - shiftMs) < 60_000) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Gives the demo agent a policy that signs every tiny payment to RECIPIENT. */
export async function openPolicy(rig: FaultRig): Promise<void> {
  await setPolicy(rig.admin, rig.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000000', thresholdUsd: '1000000' });
}

/**
 * Real load: `concurrency` clients send $0.000001 EIP-3009 signs, each with a fresh
 * Idempotency-Key; a key that got anything but 200 (an error or a dropped connection) is retried
 * with the same key, as an agent would. Every 200 is recorded (key → transaction_id).
 */
export class Load {
  readonly acks = new Map<string, string>();
  readonly statuses = new Map<number | string, number>();
  private stopped = false;
  private seq = 0;
  private readonly running: Promise<void>[];

  constructor(private readonly url: string, private readonly rig: FaultRig, concurrency: number, readonly prefix: string) {
    this.running = Array.from({ length: concurrency }, (_, i) => this.client(i));
  }

  private async client(i: number): Promise<void> {
    let retry: string | undefined;
    while (!this.stopped) {
      const key = retry ?? `${this.prefix}-${i}-${this.seq++}`;
      let status: number | string;
      try {
        const r = await postSign(this.url, this.rig.bootstrap.api_key, { agent_id: this.rig.bootstrap.agent_id, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.000001' }, key);
        status = r.status;
        if (r.status === 200) this.acks.set(key, (r.json as { transaction_id: string }).transaction_id);
      } catch {
        status = 'network';
      }
      this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
      retry = status === 200 ? undefined : key;
      // A dead server refuses at once; do not spin.
      if (status === 'network') await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Resolves once at least `n` answers were 200. */
  async acked(n: number, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.acks.size < n) {
      if (Date.now() > deadline) throw new Error(`only ${this.acks.size} acknowledgements in ${timeoutMs} ms: ${JSON.stringify([...this.statuses])}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
  }
}

/** Every acknowledged transaction id that is not `signed` in the ledger (read through the API). */
export async function missingAcks(rig: FaultRig, acks: Iterable<string>): Promise<string[]> {
  const signed = new Set((await listAllTransactions(rig.admin, rig.bootstrap.org_id, rig.bootstrap.agent_id, 'signed')).map((t) => t.id));
  return [...acks].filter((id) => !signed.has(id));
}

/** A fresh rig per test, disposed (process killed, files removed) after it. */
export function rigPerTest(): () => FaultRig {
  let rig: FaultRig | undefined;
  afterEach(async () => {
    await rig?.dispose();
    rig = undefined;
  });
  return () => (rig = new FaultRig());
}
