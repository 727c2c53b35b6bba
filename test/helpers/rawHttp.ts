import net from 'node:net';

/** What came back on a raw connection: the parsed HTTP/1.1 answer, or how the socket ended. */
export type RawResponse = {
  status: number | undefined;
  headers: Record<string, string>;
  body: string;
  /** True when the server closed the connection without answering anything. */
  closedWithoutAnswer: boolean;
  /** What ended the read: a whole response, the socket closing, or the helper's own timeout. */
  ended?: 'response' | 'closed' | 'timeout';
};

/**
 * Writes raw bytes to the server and reads one HTTP/1.1 response. Resolves as soon as a whole
 * response (headers plus content-length bytes) has arrived, when the socket closes, or after
 * timeoutMs (a safety net: `ended` says which); the socket is then destroyed. With `end`, the
 * write is followed by a FIN, as a client that gives up would send. For requests fetch refuses to send.
 */
export function rawHttp(baseUrl: string, request: string | Buffer, timeoutMs = 5000, opts: { end?: boolean } = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    let data = Buffer.alloc(0);
    let done = false;
    const finish = (ended: RawResponse['ended']) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parse(data), ended });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    socket.on('connect', () => (opts.end ? socket.end(request) : socket.write(request)));
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      const parsed = parse(data);
      const end = data.indexOf('\r\n\r\n');
      const length = Number(parsed.headers['content-length']);
      if (end >= 0 && Number.isFinite(length) && data.length - end - 4 >= length) finish('response');
    });
    socket.on('error', () => finish('closed'));
    socket.on('close', () => finish('closed'));
  });
}

function parse(data: Buffer): RawResponse {
  const text = data.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (text.length === 0) return { status: undefined, headers: {}, body: '', closedWithoutAnswer: true };
  const head = end >= 0 ? text.slice(0, end) : text;
  const [statusLine, ...lines] = head.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { status: m ? Number(m[1]) : undefined, headers, body: end >= 0 ? data.subarray(end + 4).toString('utf8') : '', closedWithoutAnswer: false };
}

/** A raw HTTP/1.1 connection kept open across requests, to test what happens to the next request. */
export type RawConnection = {
  write: (data: string | Buffer) => void;
  /** Waits for the next whole response (headers plus content-length bytes); undefined on timeout or close. */
  next: (timeoutMs?: number) => Promise<RawResponse | undefined>;
  /** Resolves true once the server has closed the connection (false after timeoutMs). */
  closed: (timeoutMs?: number) => Promise<boolean>;
  destroy: () => void;
};

/** Opens a raw TCP connection to the server. */
export async function rawConnection(baseUrl: string): Promise<RawConnection> {
  const { hostname, port } = new URL(baseUrl);
  const socket = net.connect({ host: hostname, port: Number(port) });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let data = Buffer.alloc(0);
  let isClosed = false;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of waiters) w();
  };
  socket.on('data', (chunk: Buffer) => {
    data = Buffer.concat([data, chunk]);
    wake();
  });
  socket.on('error', () => undefined);
  socket.on('close', () => {
    isClosed = true;
    wake();
  });

  /** Takes one complete response off the front of the buffer, if there is one. */
  const take = (): RawResponse | undefined => {
    const end = data.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const head = parse(data.subarray(0, end + 4));
    const length = Number(head.headers['content-length'] ?? 0);
    if (data.length - end - 4 < length) return undefined;
    const body = data.subarray(end + 4, end + 4 + length).toString('utf8');
    data = data.subarray(end + 4 + length);
    return { ...head, body };
  };

  const waitFor = <T>(check: () => T | undefined, timeoutMs: number): Promise<T | undefined> =>
    new Promise((resolve) => {
      const attempt = () => {
        const v = check();
        if (v !== undefined) finish(v);
      };
      const finish = (v: T | undefined) => {
        clearTimeout(timer);
        waiters.delete(attempt);
        resolve(v);
      };
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      waiters.add(attempt);
      attempt();
    });

  return {
    write: (d) => socket.write(d),
    next: (timeoutMs = 3000) => waitFor(() => take() ?? (isClosed ? null : undefined), timeoutMs).then((v) => v ?? undefined),
    closed: async (timeoutMs = 3000) => (await waitFor(() => (isClosed ? true : undefined), timeoutMs)) ?? false,
    destroy: () => socket.destroy(),
  };
}
