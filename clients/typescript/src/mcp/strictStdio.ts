import { Transform, type Readable, type TransformCallback } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { STDIO_DEFAULT_MAX_BUFFER_SIZE } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/*
 * The MCP SDK reads each stdio line with JSON.parse, which keeps the last of two equal keys
 * silently: `sign_payment {"amount_usd":"0.01","amount_usd":"0.4"}` signed $0.40, and a host or a
 * log that read the first saw another call than the one made. JSON.parse also rounds a number to
 * the nearest double, so `"chain_id":8453.00000000000001` arrived as 8453. Each line is checked
 * before the SDK sees it; a request holding a repeated key or such a number is answered with a
 * JSON-RPC error naming it, and nothing runs.
 */

const INVALID_REQUEST = -32600;
const INVALID_PARAMS = -32602;

/** What makes a line mean something else once JSON.parse has read it, and where (dotted keys, `[i]` for array items). */
export type Ambiguity = { path: string; kind: 'repeated_key' } | { path: string; kind: 'inexact_number'; text: string };

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** A decimal number's value as text, the same for every way of writing it: `-`, significant digits, `e`, exponent. */
function decimalValue(text: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text)!;
  const fraction = m[3] ?? '';
  let digits = `${m[2]}${fraction}`.replace(/^0+/, '');
  if (digits === '') return '0';
  let exponent = Number(m[4] ?? '0') - fraction.length;
  const significant = digits.replace(/0+$/, '');
  exponent += digits.length - significant.length;
  digits = significant;
  return `${m[1]}${digits}e${exponent}`;
}

/**
 * The first place in `text` (valid JSON) where JSON.parse would read another value than the one
 * written: a key repeated in one object (compared as JSON.parse reads keys, escapes resolved), or a
 * number the double it becomes does not hold exactly. Undefined when there is none. Iterative, so
 * that no nesting depth JSON.parse accepts can exhaust the stack.
 */
export function findAmbiguity(text: string): Ambiguity | undefined {
  // One frame per open object (its keys so far and the current one) or array (the current index);
  // the path is spelled out only for the answer.
  type Frame = { keys: Set<string> | undefined; key: string; index: number };
  const stack: Frame[] = [];
  const path = (): string => {
    let out = '';
    for (const f of stack) out += f.keys ? `${out === '' ? '' : '.'}${f.key}` : `[${f.index}]`;
    return out;
  };
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
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
        const repeated = top.keys.has(key);
        top.keys.add(key);
        top.key = key;
        if (repeated) return { path: path(), kind: 'repeated_key' };
        expectKey = false;
      }
      i = end;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      NUMBER.lastIndex = i;
      const written = NUMBER.exec(text)![0];
      const read = Number(written);
      if (!Number.isFinite(read) || decimalValue(written) !== decimalValue(String(read))) return { path: path(), kind: 'inexact_number', text: written };
      i += written.length - 1;
    }
  }
  return undefined;
}

/** The JSON-RPC answer to a line with `found` in it: an error for its request id, if one can be told. */
function refusal(text: string, found: Ambiguity): JSONRPCMessage | undefined {
  const message = JSON.parse(text) as Record<string, unknown>;
  if (typeof message !== 'object' || message === null || Array.isArray(message) || typeof message.method !== 'string' || !('id' in message)) return undefined;
  // An id given twice, or not exactly, leaves no id to answer to: the answer then has none, as
  // MCP writes such errors (JSON-RPC's id null is refused by the MCP SDK's message schema).
  const id = found.path === 'id' || (typeof message.id !== 'string' && typeof message.id !== 'number') ? undefined : message.id;
  const shown = found.path.length > 100 ? `${found.path.slice(0, 100)}…` : found.path;
  const what = found.kind === 'repeated_key'
    ? `Duplicate key "${shown}" in the request: which value was meant is not guessed`
    : `The number ${found.text.length > 40 ? `${found.text.slice(0, 40)}…` : found.text} at "${shown}" cannot be read exactly (it would be taken as ${Number(found.text)})`;
  return {
    jsonrpc: '2.0', ...(id === undefined ? {} : { id }),
    error: { code: found.path.startsWith('params.') ? INVALID_PARAMS : INVALID_REQUEST, message: `${what}, and nothing was done` },
  } as unknown as JSONRPCMessage;
}

/**
 * Passes `input` on line by line, holding back every line that is valid JSON with an ambiguity
 * (findAmbiguity): `onAmbiguous` gets it and the answer to send, if the line was a request. A line
 * longer than the SDK's buffer limit is passed on unread, for the SDK to refuse as it would.
 */
class AmbiguityFilter extends Transform {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private passing = false;

  constructor(private readonly onAmbiguous: (found: Ambiguity, answer: JSONRPCMessage | undefined) => void) {
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
    const found = findAmbiguity(text);
    if (found === undefined) this.push(line);
    else this.onAmbiguous(found, refusal(text, found));
  }
}

/**
 * The SDK's stdio transport reading `stdin` through the ambiguity check: a request with a key given
 * twice, or a number JSON.parse would not read exactly, gets a JSON-RPC error (-32602 when it is in
 * its params, else -32600) naming it and is never handed to the server; another such message (a
 * notification) is dropped and reported through the transport's onerror.
 */
export function strictStdioServerTransport(stdin: Readable = process.stdin, stdout = process.stdout): StdioServerTransport {
  let transport: StdioServerTransport | undefined = undefined;
  const filter = new AmbiguityFilter((found, answer) => {
    if (answer) void transport!.send(answer);
    else transport!.onerror?.(new Error(`Dropped a message that JSON.parse would misread at "${found.path.slice(0, 100)}" (${found.kind})`));
  });
  stdin.pipe(filter);
  transport = new StdioServerTransport(filter, stdout);
  return transport;
}
