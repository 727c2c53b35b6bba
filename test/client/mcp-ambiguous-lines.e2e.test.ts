import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { listAllTransactions, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * `paypolicy-client mcp` on stdio refuses a request that JSON.parse would read as another one: a
 * key given twice (the SDK's JSON.parse keeps the last value silently, so `sign_payment` with
 * `"amount_usd":"0.01","amount_usd":"0.4"` signed $0.40) or a number the double does not hold
 * (`"chain_id":8453.00000000000001` became 8453). The MCP SDK's own client drives the session; the
 * lines no JSON serializer writes are written raw on the same pipe, and their answers read off it.
 */

const BIN = fileURLToPath(new URL('../../clients/typescript/dist/bin.js', import.meta.url));
const RECIPIENT = '0x2222222222222222222222222222222222222222';

/**
 * The SDK's client side of stdio over a child's pipes, plus `raw`: a line written as given, whose
 * answer (matched by its string id) is returned instead of reaching the SDK client.
 */
class RawStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly buffer = new ReadBuffer();
  private readonly waiting = new Map<string, (message: Record<string, unknown>) => void>();

  constructor(private readonly child: ChildProcess) {}

  async start(): Promise<void> {
    this.child.stdout!.on('data', (chunk: Buffer) => {
      this.buffer.append(chunk);
      for (let m = this.buffer.readMessage(); m !== null; m = this.buffer.readMessage()) {
        const id = (m as { id?: unknown }).id;
        const raw = typeof id === 'string' ? this.waiting.get(id) : undefined;
        if (raw) {
          this.waiting.delete(id as string);
          raw(m as unknown as Record<string, unknown>);
        } else {
          this.onmessage?.(m);
        }
      }
    });
    this.child.on('exit', () => this.onclose?.());
  }

  async send(message: JSONRPCMessage): Promise<void> {
    this.child.stdin!.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    this.child.kill();
  }

  /** Writes `line` (a request with string id `id`) and resolves with the answer to it. */
  raw(id: string, line: string): Promise<Record<string, unknown>> {
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.writeLine(line);
    });
  }

  writeLine(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }
}

let s: TestServer;
let admin: Admin;
let agentId: string;
let transport: RawStdioTransport;
let mcp: Client;
let stderr = '';

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = adminFor(s);
  agentId = await createAgent(admin, s.bootstrap.org_id, 'mcp-repeated-keys');
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '1' });
  const child = spawn(process.execPath, [BIN, 'mcp'], {
    env: { PATH: process.env.PATH ?? '', PAYPOLICY_URL: s.url, PAYPOLICY_API_KEY: s.bootstrap.api_key, PAYPOLICY_AGENT_ID: agentId, PAYPOLICY_MAX_AMOUNT_USD: '0.5' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stderr!.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
  transport = new RawStdioTransport(child);
  mcp = new Client({ name: 'paypolicy-test-host', version: '1.0.0' });
  await mcp.connect(transport);
});

afterAll(async () => {
  await mcp?.close();
  await s?.close();
});

/** A tools/call line for sign_payment with the arguments object written as given. */
const signLine = (id: string, argumentsText: string) =>
  `{"jsonrpc":"2.0","id":"${id}","method":"tools/call","params":{"name":"sign_payment","arguments":${argumentsText}}}`;

const ledger = () => listAllTransactions(admin, s.bootstrap.org_id, agentId);

describe('paypolicy-client mcp: a line JSON.parse would misread', () => {
  test('error: sign_payment with amount_usd twice is a JSON-RPC error naming it, and nothing is signed', async () => {
    const answer = await transport.raw('dup-amount', signLine('dup-amount',
      `{"type":"eip3009","recipient_address":"${RECIPIENT}","amount_usd":"0.01","amount_usd":"0.4","chain_id":84532}`));
    expect(answer).toMatchObject({ jsonrpc: '2.0', id: 'dup-amount', error: { code: -32602, message: expect.stringContaining('"params.arguments.amount_usd"') } });
    expect(answer.result).toBeUndefined();
    expect(await ledger()).toEqual([]);
  });

  test('error: sign_payment with type twice is refused the same way, the key escaped or not', async () => {
    for (const [id, type] of [['dup-type', '"type":"eip3009","type":"permit2"'], ['dup-escaped', '"type":"eip3009","\\u0074ype":"permit2"']]) {
      const answer = await transport.raw(id!, signLine(id!, `{${type},"recipient_address":"${RECIPIENT}","amount_usd":"0.01","chain_id":84532}`));
      expect(answer, id).toMatchObject({ id, error: { code: -32602, message: expect.stringContaining('"params.arguments.type"') } });
    }
    expect(await ledger()).toEqual([]);
  });

  test('error: a number JSON.parse would round is a JSON-RPC error naming it, and nothing is signed', async () => {
    const answer = await transport.raw('inexact-chain', signLine('inexact-chain',
      `{"type":"eip3009","recipient_address":"${RECIPIENT}","amount_usd":"0.01","chain_id":84532.00000000000001}`));
    expect(answer).toMatchObject({ id: 'inexact-chain', error: { code: -32602, message: expect.stringContaining('84532.00000000000001 at "params.arguments.chain_id"') } });
    expect(await ledger()).toEqual([]);
  });

  test('error: a repeated key outside the params is -32600; a repeated id is answered without an id', async () => {
    const method = await transport.raw('dup-method', '{"jsonrpc":"2.0","id":"dup-method","method":"tools/list","method":"tools/call"}');
    expect(method).toMatchObject({ id: 'dup-method', error: { code: -32600, message: expect.stringContaining('"method"') } });
    // The answer to a repeated id has no id to carry: catch it on the SDK client's side of the pipe.
    const dupId = new Promise<JSONRPCMessage>((resolve) => {
      const previous = transport.onmessage;
      transport.onmessage = (m) => {
        if (!('id' in m)) {
          transport.onmessage = previous;
          resolve(m);
        } else {
          previous?.(m);
        }
      };
    });
    transport.writeLine('{"jsonrpc":"2.0","id":"a","id":"b","method":"tools/list"}');
    expect(await dupId).toEqual({ jsonrpc: '2.0', error: { code: -32600, message: expect.stringContaining('"id"') } });
  });

  test('behavior: the same raw line with each key once signs, and the session goes on serving the SDK client', async () => {
    const answer = await transport.raw('once', signLine('once', `{"type":"eip3009","recipient_address":"${RECIPIENT}","amount_usd":"0.01","chain_id":84532}`));
    expect(answer.error).toBeUndefined();
    const result = answer.result as CallToolResult;
    expect(result.isError, JSON.stringify(result)).not.toBe(true);
    expect(JSON.parse((result.content[0] as { text: string }).text)).toMatchObject({ outcome: 'signed', cost_usd: '0.01' });
    const rows = await ledger();
    expect(rows.map((r) => r.amountUsd)).toEqual(['0.01']);
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name)).toContain('sign_payment');
    expect(stderr).toBe('');
  });
});
