import { constants, fstatSync, openSync, readlinkSync, write, writeSync } from 'node:fs';
import { isatty } from 'node:tty';
import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Paths pino censors wherever they appear. Nothing in the service logs headers, bodies or
 * config objects wholesale; this list is the second line of defence, fixed at start-up.
 */
const REDACT = [
  'authorization', '*.authorization', 'headers', '*.headers', 'apiKey', '*.apiKey', 'api_key', '*.api_key',
  'adminToken', '*.adminToken', 'admin_token', '*.admin_token', 'privateKey', '*.privateKey', 'masterKey',
  '*.masterKey', 'plaintext', '*.plaintext', 'plaintextKey', '*.plaintextKey', 'password', '*.password',
  'signature', '*.signature', 'body', '*.body',
];

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The longest a log line waits in the stdout buffer for others to fill it. */
export const LOG_FLUSH_MS = 200;

/** Bytes gathered before a write: one syscall carries many lines. */
const CHUNK_BYTES = 16 * 1024;

/**
 * The most bytes of log lines that wait in memory for a stdout that is not read. Past it new lines
 * are dropped and counted, and a line saying how many goes out once there is room again. Why:
 * unbounded, a stalled log reader (a hung collector, a stopped terminal) grew the server's memory
 * at the log rate (~5.5 MB/s at 26,000 requests/s) until the kernel killed it. 16 MiB is minutes
 * of a busy server's lines, and small beside the server's ~250 MB.
 */
export const MAX_WAITING_BYTES = 16 * 1024 * 1024;

/** How soon a write that found stdout full is tried again. */
const RETRY_MS = 5;

/** How long the exit path waits for room on a full stdout (its reader fell behind) before giving up. */
const EXIT_WAIT_MS = 5_000;

/** The signals that stop the server; while the exit waits for stdout, one ends the process at once. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'] as const;

/** Every stdout writer's exit path, run by one exit hook (below). */
const exitPaths = new Set<WeakRef<() => void>>();
let exitHookInstalled = false;
const forgetExitPath = new FinalizationRegistry<WeakRef<() => void>>((ref) => exitPaths.delete(ref));
const nap = new Int32Array(new SharedArrayBuffer(4));
const sleep = (ms: number) => Atomics.wait(nap, 0, 0, ms);

/** The system calls a stdout writer makes (fault tests give it failing ones). */
export type StdoutIo = {
  writeSync: typeof writeSync; write: typeof write; isatty: typeof isatty;
  /** Whether `fd` is a pipe (a FIFO), whose writes of up to PIPE_BUF bytes are all or nothing. */
  isPipe: (fd: number) => boolean;
  /** The terminal on `fd` opened again, non-blocking, on a file description of its own; undefined when it cannot be. */
  openTerminal: (fd: number) => number | undefined;
};

/**
 * Why a file description of our own: Node keeps a terminal blocking, and O_NONBLOCK set on the one
 * stdout shares with the shell that started us would be left on the shell's terminal too.
 */
function openTerminal(fd: number): number | undefined {
  try {
    const path = readlinkSync(`/proc/self/fd/${fd}`);
    if (!path.startsWith('/dev/')) return undefined;
    return openSync(path, constants.O_WRONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch {
    return undefined;
  }
}
function isPipe(fd: number): boolean {
  try {
    return fstatSync(fd).isFIFO();
  } catch {
    return false;
  }
}
const SYSTEM_IO: StdoutIo = { writeSync, write, isatty, openTerminal, isPipe };

/**
 * POSIX's PIPE_BUF on Linux: a write to a pipe of at most this many bytes goes in whole or fails
 * with EAGAIN, never in part.
 */
const PIPE_BUF = 4096;

/**
 * The longest run of whole lines at the head of `bytes` that fits in one all-or-nothing pipe
 * write; a first line longer than that goes alone, so only it can be cut, never the lines after it.
 */
function wholeLinesFor(bytes: Buffer): Buffer {
  if (bytes.length <= PIPE_BUF) return bytes;
  const end = bytes.lastIndexOf(0x0a, PIPE_BUF - 1);
  if (end >= 0) return bytes.subarray(0, end + 1);
  const first = bytes.indexOf(0x0a, PIPE_BUF);
  return first < 0 ? bytes : bytes.subarray(0, first + 1);
}

/** What bufferedStdout returns: pino's stream, with the flushes pino calls when a stream has them. */
export type StdoutStream = DestinationStream & { flush: (cb?: (err?: Error) => void) => void; flushSync: () => void };

/**
 * stdout in 16 KiB writes rather than one write syscall per line (one line per request adds up
 * under load), but never holding a line back for longer than about LOG_FLUSH_MS: a quiet server's
 * lines appear at once, not when a chunk has gathered. Lines leave in order, whole, and what is
 * left at exit is written before the process ends (short of SIGKILL).
 *
 * How a write is made depends on what stdout is:
 * - A pipe or a socket (a supervisor, a container runtime): `serve` prints its banner through
 *   process.stdout first, and libuv leaves such a stdout in non-blocking mode. Writes are
 *   synchronous, from this thread: a write that finds it full takes what fits, and the rest waits
 *   here, ahead of every newer line, retried every RETRY_MS. The exit waits up to EXIT_WAIT_MS
 *   for a reader that fell behind. Why not sonic-boom's writes on libuv's pool, as before: one
 *   still in flight at exit was lost, one not yet started came out after newer lines, and a write
 *   that failed was retried at once, forever (test/startup-output.test.ts).
 * - A terminal: Node keeps it blocking, and a terminal that stops reading (Ctrl-S, a slow link)
 *   would stop the event loop. It is opened again in non-blocking mode (openTerminal) and written
 *   like a pipe. Where it cannot be (no /proc), writes go to libuv's pool, one at a time, and at
 *   exit the lines behind a write still there are dropped: written then, they could come out
 *   before it (the pool busy) or block the exit (the terminal stopped).
 * - A file: synchronous, as Node's own stdout writes files.
 *
 * What waits for a stdout that is not read is bounded (MAX_WAITING_BYTES): newer lines are dropped
 * past it, whole, and counted in a warning line that goes out in their place once there is room.
 *
 * A write that fails otherwise (stdout closed, a full disk) drops what waits, and later lines are
 * tried again (a disk can have room again). A line cut short by such a failure is ended with a
 * newline before the next one, so it cannot run into it.
 *
 * Lines gather in an array and are joined once per write: appending them to one string made every
 * line copy all the lines before it (3.8 KiB of garbage per request under the sign bench).
 * Measured against the pool writes (two servers, alternating loads): 1-4% more throughput.
 */
export function bufferedStdout(stdout = 1, io: StdoutIo = SYSTEM_IO): StdoutStream {
  const terminal = io.isatty(stdout);
  const own = terminal ? io.openTerminal(stdout) : undefined;
  const fd = own ?? stdout;
  const onPool = terminal && own === undefined;
  // A pipe is written in pieces of whole lines it takes whole or not at all: a reader that stops
  // for good (a log shipper stopped, then the exit gives up on it) is left whole lines, not a line
  // cut by a write that filled the pipe.
  const pipe = !terminal && io.isPipe(fd);
  let lines: string[] = [];
  let gathered = 0;
  // Bytes handed over but not yet written, oldest first, and how many there are.
  const waiting: Buffer[] = [];
  let waitingBytes = 0;
  // Lines dropped because MAX_WAITING_BYTES were waiting; reported once there is room.
  let dropped = 0;
  // The output ends inside a line (the last byte written was not a newline), and whether the
  // head of `waiting` is the rest of that line (a write took only part of it) or new lines.
  let lineOpen = false;
  let continuing = false;
  // A pool write (terminals) is running.
  let inFlight = false;
  let timer: NodeJS.Timeout | undefined;

  const enqueue = (bytes: Buffer) => {
    waiting.push(bytes);
    waitingBytes += bytes.length;
  };
  const gather = () => {
    // Once lines were dropped, none is taken until half the backlog is written: one notice per
    // stall, not one per chunk that happens to fit.
    if (dropped > 0 && waitingBytes <= MAX_WAITING_BYTES / 2) {
      enqueue(Buffer.from(`{"level":40,"time":"${new Date().toISOString()}","service":"paypolicy","dropped":${dropped},`
        + `"msg":"log lines dropped: stdout was not read"}\n`));
      dropped = 0;
    }
    if (lines.length === 0) return;
    const chunk = Buffer.from(lines.length === 1 ? lines[0]! : lines.join(''), 'utf8');
    // Each write is one whole line: a chunk is kept or dropped whole, so no line is cut here.
    if (dropped > 0 || waitingBytes + chunk.length > MAX_WAITING_BYTES) dropped += lines.length;
    else enqueue(chunk);
    lines = [];
    gathered = 0;
  };
  /** Before a write starts: new lines after a line a failed write cut short start on a line of their own. */
  const endCutLine = () => {
    if (lineOpen && !continuing && waiting.length > 0) {
      waiting.unshift(Buffer.from('\n'));
      waitingBytes += 1;
    }
  };
  /** The first `n` bytes waiting were written. */
  const wrote = (n: number) => {
    if (n === 0) return;
    const head = waiting[0]!;
    waitingBytes -= n;
    lineOpen = head[n - 1] !== 0x0a;
    continuing = n < head.length;
    if (continuing) waiting[0] = head.subarray(n);
    else waiting.shift();
  };
  /** Closed (EPIPE), a full disk (ENOSPC), an I/O error: what waits is dropped. */
  const failed = () => {
    continuing = false;
    waiting.length = 0;
    waitingBytes = 0;
  };
  const retryable = (code: string | undefined) => code === 'EAGAIN' || code === 'EINTR';
  /** Synchronous writes until stdout is full; false when bytes are still waiting. */
  const writeNow = (): boolean => {
    endCutLine();
    while (waiting.length > 0) {
      try {
        wrote(io.writeSync(fd, pipe ? wholeLinesFor(waiting[0]!) : waiting[0]!));
      } catch (err) {
        if (retryable((err as NodeJS.ErrnoException).code)) return false;
        failed();
      }
    }
    return true;
  };
  /** One pool write at a time, each started when the last one ends. */
  const writeOnPool = () => {
    if (inFlight || waiting.length === 0) return;
    endCutLine();
    inFlight = true;
    const head = waiting[0]!;
    io.write(fd, head, 0, head.length, null, (err, n) => {
      inFlight = false;
      if (!err) wrote(n);
      else if (!retryable(err.code)) failed();
      if (err && waiting.length > 0) retrySoon();
      else writeOnPool();
    });
  };
  const handOver = (): boolean => {
    gather();
    if (!onPool) {
      if (!writeNow()) return false;
      if (dropped === 0) return true;
      // The backlog is written: the notice of what was dropped goes out now, not with a later line.
      gather();
      return writeNow();
    }
    writeOnPool();
    return true;
  };
  /** After a write that found stdout full: try again soon, not at the next flush. */
  const retrySoon = () => {
    clearTimeout(timer);
    timer = setTimeout(tick, RETRY_MS).unref();
  };
  function tick() {
    timer = undefined;
    if (!handOver()) retrySoon();
  }
  const atExit = () => {
    gather();
    if (waiting.length === 0) return;
    // Nothing else runs now: a stop signal ends the process rather than wait on its handler.
    for (const signal of STOP_SIGNALS) process.removeAllListeners(signal);
    // A terminal write still on the pool may not even have started (the pool busy), or may be
    // blocked (the terminal stopped): anything written now could come out before it, or block
    // the exit. What is left is dropped instead.
    if (inFlight) return;
    const until = Date.now() + EXIT_WAIT_MS;
    while (!writeNow() && Date.now() < until) sleep(RETRY_MS);
    if (dropped > 0 && waiting.length === 0) {
      gather();
      writeNow();
    }
  };
  const ref = new WeakRef(atExit);
  exitPaths.add(ref);
  forgetExitPath.register(atExit, ref);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const r of exitPaths) r.deref()?.();
    });
  }
  return {
    write(line: string) {
      // String length, not bytes: the bound is only a batch size.
      gathered += line.length;
      lines.push(line);
      if (gathered >= CHUNK_BYTES && !handOver()) retrySoon();
      timer ??= setTimeout(tick, LOG_FLUSH_MS).unref();
    },
    // pino's logger.flush() and flushSync() reach the stream through these. flush never waits
    // for room (the timer, or the exit, writes what is left); flushSync does, like the exit.
    flush: (cb?: (err?: Error) => void) => {
      if (!handOver()) retrySoon();
      cb?.();
    },
    flushSync: atExit,
    // Keeps atExit alive exactly as long as this stream (the WeakRef above does not).
    atExit,
  } as StdoutStream;
}

/** What the one access line per request carries: scalars the server builds itself. */
export type AccessLine = { reqId: string; method: string | undefined; path: string; status: number; ms: number; httpVersion: string };

const accessLogs = new WeakMap<Logger, (line: AccessLine) => void>();

/** JSON logger; `destination` lets tests capture every line. By default lines go to stdout (bufferedStdout). */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const dest = destination ?? bufferedStdout();
  const base = { level, base: { service: 'paypolicy' }, timestamp: pino.stdTimeFunctions.isoTime };
  const log = pino({ ...base, redact: { paths: REDACT, censor: '[redacted]' }, serializers: { err: pino.stdSerializers.err } }, dest);
  accessLogs.set(log, (l) => {
    if (!log.isLevelEnabled('info')) return;
    // The line pino writes for log.info({ reqId, method, path, status, ms, httpVersion }, 'request'),
    // same keys in the same order (a missing method left out, as pino does), each value
    // JSON-encoded, built by hand: through pino (even without redaction) it cost ~20 µs of the
    // event loop per request under the sign bench, a fifth of a 404's whole cost.
    const method = l.method === undefined ? '' : `"method":${JSON.stringify(l.method)},`;
    dest.write(`{"level":30,"time":"${new Date().toISOString()}","service":"paypolicy","reqId":${JSON.stringify(l.reqId)},${method}`
      + `"path":${JSON.stringify(l.path)},"status":${l.status},"ms":${l.ms},"httpVersion":${JSON.stringify(l.httpVersion)},"msg":"request"}\n`);
  });
  return log;
}

/**
 * Writes the one access line per request on `log`'s stream at info level. Safe without redaction
 * only because its fields are the fixed scalars of AccessLine, built by the server itself (request
 * id, method, path without query, status, duration, HTTP version), never a header, body or config
 * object; everything else goes through `log` and stays redacted. A logger not made by createLogger
 * gets the same line through pino.
 */
export function accessLog(log: Logger): (line: AccessLine) => void {
  return accessLogs.get(log) ?? (({ reqId, method, path, status, ms, httpVersion }) => log.info({ reqId, method, path, status, ms, httpVersion }, 'request'));
}
