import { constants, fstatSync, openSync, readlinkSync } from 'node:fs';
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

/**
 * The most bytes of log lines that wait in memory for a stdout that is not read. Past it new lines
 * are dropped and counted, and a line saying how many goes out once a write succeeds again. Why:
 * unbounded, a stalled log reader (a hung collector, a stopped terminal) grows the server's memory
 * at the log rate (~5.5 MB/s at 26,000 requests/s) until the kernel kills it. 16 MiB is minutes of
 * a busy server's lines, and small beside the server's ~250 MB.
 */
export const MAX_WAITING_BYTES = 16 * 1024 * 1024;

/** Bytes gathered before a write to a file or a socket: one syscall carries many lines. */
const CHUNK_BYTES = 16 * 1024;

/**
 * POSIX's PIPE_BUF on Linux: a write to a pipe of at most this many bytes goes in whole or fails
 * with EAGAIN, never in part. sonic-boom gathers lines into writes of at most `maxWrite` bytes and
 * puts a longer line in a write of its own, so on a pipe every write is whole lines it takes whole
 * or not at all: a reader that stops for good is left whole lines, not a line cut by a full pipe.
 */
const PIPE_BUF = 4096;

/** How soon a write that found stdout full is tried again. */
const RETRY_MS = 5;

/** How long the exit path waits for room on a full stdout (its reader fell behind) before giving up. */
const EXIT_WAIT_MS = 5_000;

/** The signals that stop the server; while the exit waits for stdout, one ends the process at once. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'] as const;

const nap = new Int32Array(new SharedArrayBuffer(4));

/**
 * The terminal on `fd` opened again, non-blocking, on a file description of its own; undefined when
 * it cannot be. Node keeps a terminal blocking, so a terminal that stops reading (Ctrl-S, a slow
 * link) would stop the event loop at the next write; and O_NONBLOCK set on the description stdout
 * shares with the shell that started us would be left on the shell's terminal too.
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

/**
 * stdout through pino's own destination (sonic-boom): lines gathered into writes of up to 16 KiB
 * (4 KiB of whole lines on a pipe), none held back longer than about LOG_FLUSH_MS, in order, and
 * what is left at exit written before the process ends (short of SIGKILL).
 *
 * Writes are synchronous, from this thread, on a descriptor that does not block: a pipe or a socket
 * (`serve` prints its banner through process.stdout first, which leaves either non-blocking), or
 * the terminal opened again (openTerminal). A write that finds stdout full leaves its lines waiting
 * here, ahead of every newer line, and is tried again within RETRY_MS. sonic-boom's asynchronous
 * mode is not used there: a write still on libuv's pool at exit was lost, or came out after newer
 * lines. Only a terminal that cannot be opened again is written on the pool, and at exit the lines
 * behind a write still there are left unwritten rather than written ahead of it.
 *
 * The exit waits up to EXIT_WAIT_MS for a reader that fell behind, and a stop signal meanwhile ends
 * the process at once. A write that fails otherwise (stdout closed, a full disk) keeps its lines
 * for a later write, within MAX_WAITING_BYTES, and the exit does not wait on it.
 */
export function stdoutDestination(stdout = 1): DestinationStream {
  const terminal = isatty(stdout);
  const own = terminal ? openTerminal(stdout) : undefined;
  const fd = own ?? stdout;
  const maxWrite = !terminal && isPipe(fd) ? PIPE_BUF : CHUNK_BYTES;
  const stream = pino.destination({
    dest: fd, sync: !terminal || own !== undefined, minLength: maxWrite - 1, maxWrite, maxLength: MAX_WAITING_BYTES, periodicFlush: LOG_FLUSH_MS,
    // A full stdout never blocks the event loop (the lines wait, tried again by retrySoon), and the
    // exit retries on its own clock: sonic-boom's own retry sleeps 100 ms, a pipe's worth at a time.
    retryEAGAIN: () => false,
  });
  let retry: NodeJS.Timeout | undefined;
  const retrySoon = () => (retry ??= setTimeout(() => {
    retry = undefined;
    stream.flush();
  }, RETRY_MS).unref());
  // What the writes since these were reset met: a full stdout, another failure, how many bytes went out.
  let full = false;
  let failing = false;
  let written = 0;
  // Lines refused while MAX_WAITING_BYTES were waiting, counted in a line once one fits again.
  let dropped = 0;
  let noticing = false;
  let noticeRefused = false;
  const noteDropped = () => {
    // Not again from inside its own write: a synchronous write that fills a chunk emits 'write'
    // before it returns, and a second notice would count the same lines twice.
    if (dropped === 0 || noticing) return;
    noticing = true;
    noticeRefused = false;
    stream.write(`{"level":40,"time":"${new Date().toISOString()}","service":"paypolicy","dropped":${dropped},`
      + `"msg":"log lines dropped: stdout was not read"}\n`);
    noticing = false;
    if (!noticeRefused) dropped = 0;
  };
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EAGAIN' || err.code === 'EBUSY') {
      full = true;
      retrySoon();
    } else {
      failing = true;
    }
  });
  stream.on('drop', () => {
    if (noticing) noticeRefused = true;
    else dropped++;
  });
  stream.on('write', (n: number) => {
    failing = false;
    written += n;
    noteDropped();
  });
  process.on('exit', () => {
    // Nothing else runs now: a stop signal ends the process rather than wait on its handler.
    for (const signal of STOP_SIGNALS) process.removeAllListeners(signal);
    noteDropped();
    // flush() writes synchronously until stdout is full or a chunk's worth is left; a round that
    // writes nothing and meets no full stdout has nothing left to write. Not flushSync: it retries a
    // write that failed with anything but EAGAIN (a full disk) forever.
    const until = Date.now() + EXIT_WAIT_MS;
    for (;;) {
      full = false;
      written = 0;
      stream.flush();
      if (failing || (!full && written === 0)) return;
      if (full) {
        // The reader did not come back before the deadline: what is in the pipe is all it gets.
        if (Date.now() >= until) return;
        Atomics.wait(nap, 0, 0, RETRY_MS);
      }
    }
  });
  return stream;
}

/** What the one access line per request carries: scalars the server builds itself. */
export type AccessLine = { reqId: string; method: string | undefined; path: string; status: number; ms: number; httpVersion: string };

const accessLogs = new WeakMap<Logger, (line: AccessLine) => void>();

/** JSON logger; `destination` lets tests capture every line. By default lines go to stdout (stdoutDestination). */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const dest = destination ?? stdoutDestination();
  const base = { level, base: { service: 'paypolicy' }, timestamp: pino.stdTimeFunctions.isoTime };
  const log = pino({ ...base, redact: { paths: REDACT, censor: '[redacted]' }, serializers: { err: pino.stdSerializers.err } }, dest);
  accessLogs.set(log, (l) => {
    if (!log.isLevelEnabled('info')) return;
    // The line pino writes for log.info({ reqId, method, path, status, ms, httpVersion }, 'request'),
    // same keys in the same order (a missing method left out, as pino does), each value
    // JSON-encoded, built by hand. Through pino (node dist/bench/ab.js, interleaved): 11-23 µs more
    // of the main thread per payment, 3-6 % of the server's CPU on REST sign; against the build
    // with the stdout writer of its own, Connect JSON Sign ran at 0.87x (twice), 0.94x with this line.
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
