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

/** Handed-over lines still gathered in front of each stdout stream, written out at exit (see below). */
const gatheredAtExit = new Set<WeakRef<() => void>>();
let exitHookInstalled = false;

/**
 * stdout in 4 KiB chunks rather than one write syscall per line (one line per request adds up
 * under load), but never holding a line back for longer than about LOG_FLUSH_MS: a quiet server's
 * lines appear at once, not when 4 KiB have gathered. A flush asked for while a write is in flight
 * does nothing, so the timer keeps coming back until every byte handed over was written. On exit,
 * however the process exits short of SIGKILL, pino writes what sonic-boom holds synchronously (it
 * registers the stream for that itself, since the stream is asynchronous); the lines gathered here
 * are handed to it first by an exit hook of our own.
 *
 * Lines gather in an array here and reach sonic-boom 4 KiB at a time, not one by one: sonic-boom's
 * write measures the byte length of the string it appends to, which flattens that string, so with
 * the gathering left to it every line copied all the lines before it (3.8 KiB of garbage per
 * request under the sign bench, 7% of everything the event loop allocated).
 */
function bufferedStdout(): DestinationStream {
  const stream = pino.destination({ dest: 1, sync: false, minLength: 4096 });
  let lines: string[] = [];
  let gathered = 0;
  let unwritten = 0;
  let timer: NodeJS.Timeout | undefined;
  const destroyed = () => (stream as { destroyed?: boolean }).destroyed === true;
  stream.on('write', (n: number) => {
    unwritten = Math.max(0, unwritten - n);
  });
  const handOver = () => {
    if (lines.length === 0 || destroyed()) return;
    const chunk = lines.length === 1 ? lines[0]! : lines.join('');
    lines = [];
    gathered = 0;
    stream.write(chunk);
  };
  const tick = () => {
    timer = undefined;
    handOver();
    if (unwritten === 0 || destroyed()) return;
    stream.flush();
    timer = setTimeout(tick, LOG_FLUSH_MS).unref();
  };
  const atExit = () => {
    if (lines.length === 0 || destroyed()) return;
    handOver();
    stream.flushSync();
  };
  const ref = new WeakRef(atExit);
  gatheredAtExit.add(ref);
  stream.on('close', () => gatheredAtExit.delete(ref));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const r of gatheredAtExit) r.deref()?.();
    });
  }
  return {
    write(line: string) {
      const n = Buffer.byteLength(line);
      unwritten += n;
      gathered += n;
      lines.push(line);
      if (gathered >= 4096) handOver();
      timer ??= setTimeout(tick, LOG_FLUSH_MS).unref();
    },
    // pino's logger.flush() and its exit handler reach the stream through these.
    flush: (cb?: (err?: Error) => void) => {
      handOver();
      stream.flush(cb);
    },
    flushSync: () => {
      handOver();
      stream.flushSync();
    },
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
