import { writeSync } from 'node:fs';
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

/** How long the exit path waits for room on a full stdout (its reader fell behind) before giving up. */
const EXIT_WAIT_MS = 5_000;

/** Every stdout writer's exit path, run by one exit hook (below). */
const exitPaths = new Set<WeakRef<() => void>>();
let exitHookInstalled = false;
const forgetExitPath = new FinalizationRegistry<WeakRef<() => void>>((ref) => exitPaths.delete(ref));
const nap = new Int32Array(new SharedArrayBuffer(4));

/**
 * stdout in 16 KiB writes rather than one write syscall per line (one line per request adds up
 * under load), but never holding a line back for longer than about LOG_FLUSH_MS: a quiet server's
 * lines appear at once, not when a chunk has gathered.
 *
 * Every write is synchronous and in order, from this thread. Why not sonic-boom's asynchronous
 * writes on libuv's pool: a write still in flight when the process exits (stdout full, its reader
 * behind) was lost, and one not yet started came out after the lines written synchronously at
 * exit (test/startup-output.test.ts). When `paypolicy serve` has printed its banner, a pipe on
 * stdout is in non-blocking mode (libuv sets it): a write that finds it full takes what fits, and
 * the rest waits here, ahead of every newer line, for the next turn of the timer. On a blocking
 * stdout (a file, a terminal) a write waits for room, as Node's own stdout does. At exit, however
 * the process exits short of SIGKILL, whatever is left is written before the process ends,
 * waiting up to EXIT_WAIT_MS for a reader that fell behind. A write that fails otherwise (stdout
 * closed, a full disk) drops what waits; later lines are tried again. Measured against the pool
 * writes (two servers, alternating loads): 1-4% more throughput, a few µs of CPU less per request.
 *
 * Lines gather in an array and are joined once per write: appending them to one string made every
 * line copy all the lines before it (3.8 KiB of garbage per request under the sign bench).
 */
function bufferedStdout(fd = 1): DestinationStream {
  let lines: string[] = [];
  let gathered = 0;
  // Bytes already handed over but not yet written (stdout full), oldest first.
  const waiting: Buffer[] = [];
  let timer: NodeJS.Timeout | undefined;

  /** Writes the waiting bytes until stdout is full; false when some are still waiting. */
  const writeWaiting = (): boolean => {
    while (waiting.length > 0) {
      const head = waiting[0]!;
      let n: number;
      try {
        n = writeSync(fd, head);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EAGAIN' || code === 'EINTR') return false;
        // Closed (EPIPE), full disk (ENOSPC), I/O error: what waits is dropped, the next lines
        // are tried again (a disk that has room again takes them).
        waiting.length = 0;
        return true;
      }
      if (n < head.length) waiting[0] = head.subarray(n);
      else waiting.shift();
    }
    return true;
  };
  const handOver = (): boolean => {
    if (lines.length > 0) {
      const chunk = lines.length === 1 ? lines[0]! : lines.join('');
      lines = [];
      gathered = 0;
      waiting.push(Buffer.from(chunk, 'utf8'));
    }
    return writeWaiting();
  };
  const tick = () => {
    timer = undefined;
    if (!handOver()) timer = setTimeout(tick, LOG_FLUSH_MS).unref();
  };
  const atExit = () => {
    const until = Date.now() + EXIT_WAIT_MS;
    while (!handOver() && Date.now() < until) Atomics.wait(nap, 0, 0, 5);
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
      if (gathered >= CHUNK_BYTES) handOver();
      timer ??= setTimeout(tick, LOG_FLUSH_MS).unref();
    },
    // pino's logger.flush() and flushSync() reach the stream through these. flush never waits
    // for room (the timer, or the exit, writes what is left); flushSync does, like the exit.
    flush: (cb?: (err?: Error) => void) => {
      if (!handOver()) timer ??= setTimeout(tick, LOG_FLUSH_MS).unref();
      cb?.();
    },
    flushSync: atExit,
    // Keeps atExit alive exactly as long as this stream (the WeakRef above does not).
    atExit,
  } as DestinationStream;
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
