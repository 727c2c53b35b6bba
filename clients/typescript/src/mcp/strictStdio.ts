import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { STDIO_DEFAULT_MAX_BUFFER_SIZE } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/*
 * The MCP SDK reads each stdio line with JSON.parse, which keeps the last of two equal keys
 * silently: `sign_payment {"amount_usd":"0.01","amount_usd":"0.4"}` signed $0.40, and a host or a
 * log that read the first saw another call than the one made. Each line is checked for repeated
 * keys before the SDK sees it; a request holding one is answered with a JSON-RPC error naming the
 * key, and nothing runs.
 */

const INVALID_REQUEST = -32600;
const INVALID_PARAMS = -32602;

/**
 * The path (dotted keys, `[i]` for array items, e.g. `params.arguments.amount_usd`) of the first
 * key repeated in one object of `text`, which must be valid JSON; undefined when there is none.
 * Keys are compared as JSON.parse reads them, escapes resolved. Iterative, so that no nesting
 * depth JSON.parse accepts can exhaust the stack.
 */
export function repeatedJsonKey(text: string): string | undefined {
  // One frame per open object (its keys so far and the current one) or array (the current index);
  // the path is spelled out only for the answer.
  type Frame = { keys: Set<string> | undefined; key: string; index: number };
  const stack: Frame[] = [];
  const pathTo = (key: string): string => {
    let path = '';
    for (const f of stack.slice(0, -1)) path += f.keys ? `${path === '' ? '' : '.'}${f.key}` : `[${f.index}]`;
    return `${path}${path === '' ? '' : '.'}${key}`;
  };
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{' || c === '[') {
      stack.push({ keys: c === '{' ? new Set() : undefined, key: '', index: 0 });
      expectKey = c === '{';
    } else if (c === '}' || c === ']') {
      stack.pop();
      expectKey = false;
    } else if (c === ',') {
      const top = stack[stack.length - 1];
      if (top?.keys) expectKey = true;
      else if (top) top.index++;
    } else if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      const top = stack[stack.length - 1];
      if (expectKey && top?.keys) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (top.keys.has(key)) return pathTo(key);
        top.keys.add(key);
        top.key = key;
        expectKey = false;
      }
      i = end;
    }
  }
  return undefined;
}

/** The JSON-RPC answer to a line whose key `path` is repeated: an error for its request id, if one can be told. */
function refusal(text: string, path: string): JSONRPCMessage | undefined {
  const message = JSON.parse(text) as Record<string, unknown>;
  if (typeof message !== 'object' || message === null || Array.isArray(message) || typeof message.method !== 'string' || !('id' in message)) return undefined;
  // A repeated id leaves no id to answer to: the answer then has none, as MCP writes such errors
  // (JSON-RPC's id null is refused by the MCP SDK's message schema).
  const id = path === 'id' || (typeof message.id !== 'string' && typeof message.id !== 'number') ? undefined : message.id;
  const shown = path.length > 100 ? `${path.slice(0, 100)}…` : path;
  return {
    jsonrpc: '2.0', ...(id === undefined ? {} : { id }),
    error: {
      code: path.startsWith('params.') ? INVALID_PARAMS : INVALID_REQUEST,
      message: `Duplicate key "${shown}" in the request: which value was meant is not guessed, and nothing was done`,
    },
  } as unknown as JSONRPCMessage;
}

/**
 * Passes `input` on line by line, holding back every line that is valid JSON with a repeated key:
 * `onRepeated` gets the key's path and the answer to send, if the line was a request. A line
 * longer than the SDK's buffer limit is passed on unread, for the SDK to refuse as it would.
 */
class RepeatedKeyFilter extends Transform {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private passing = false;

  constructor(private readonly onRepeated: (path: string, answer: JSONRPCMessage | undefined) => void) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl + 1);
      start = nl + 1;
      if (this.passing) {
        this.push(piece);
        this.passing = false;
        continue;
      }
      const line = this.pending.length === 0 ? piece : Buffer.concat([...this.pending, piece]);
      this.pending = [];
      this.pendingBytes = 0;
      this.check(line);
    }
    const rest = chunk.subarray(start);
    if (rest.length > 0) {
      if (this.passing) {
        this.push(rest);
      } else {
        this.pending.push(rest);
        this.pendingBytes += rest.length;
        if (this.pendingBytes > STDIO_DEFAULT_MAX_BUFFER_SIZE) {
          this.push(Buffer.concat(this.pending));
          this.pending = [];
          this.pendingBytes = 0;
          this.passing = true;
        }
      }
    }
    done();
  }

  private check(line: Buffer): void {
    const text = line.toString('utf8').replace(/\r?\n$/, '');
    try {
      JSON.parse(text);
    } catch {
      // Not JSON: the SDK refuses it as it refuses any such line.
      this.push(line);
      return;
    }
    const path = repeatedJsonKey(text);
    if (path === undefined) this.push(line);
    else this.onRepeated(path, refusal(text, path));
  }
}

/**
 * The SDK's stdio transport reading `stdin` through the repeated-key check: a request with a key
 * given twice gets a JSON-RPC error (-32602 when the key is in its params, else -32600) naming it
 * and is never handed to the server; another such message (a notification) is dropped and reported
 * through the transport's onerror.
 */
export function strictStdioServerTransport(stdin: Readable = process.stdin, stdout = process.stdout): StdioServerTransport {
  let transport: StdioServerTransport | undefined = undefined;
  const filter = new RepeatedKeyFilter((path, answer) => {
    if (answer) void transport!.send(answer);
    else transport!.onerror?.(new Error(`Dropped a message with the duplicate key "${path.slice(0, 100)}"`));
  });
  stdin.pipe(filter);
  transport = new StdioServerTransport(filter, stdout);
  return transport;
}
