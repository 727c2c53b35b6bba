import { once } from 'node:events';
import http from 'node:http';
import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { gunzipSync, gzipSync } from 'node:zlib';
import { create, fromBinary, toBinary, toJson, type DescMessage, type MessageInitShape } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { findTrailerError } from '@connectrpc/connect/protocol-grpc';
import { ErrorInfoSchema } from '../gen/paypolicy/v1/error_pb.js';
import { PaymentPolicyService, PaymentType } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createAgent, upsertService, type Admin } from './helpers/admin.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * The bytes PaymentPolicyService answers with on the wire, for gRPC (h2c) and Connect (HTTP/1.1
 * and h2c), seen by raw HTTP clients: status, every header and trailer (but `date`), the frames
 * and the body. Pinned from connect-node's own handlers: however the server dispatches unary
 * calls, these must not change (the wire contract, including the odd corners: compression,
 * timeouts, framing errors, sizes). Values that differ per request (request ids, agent ids) are
 * replaced by placeholders.
 */

let s: TestServer;
let admin: Admin;
let agentId: string;
let session: ClientHttp2Session;

const RECIPIENT = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';
const M = PaymentPolicyService.method;
const path = (m: { name: string }) => `/${PaymentPolicyService.typeName}/${m.name}`;

beforeAll(async () => {
  s = await startTestServer();
  admin = adminFor(s);
  agentId = await createAgent(admin, s.bootstrap.org_id, 'wire');
  await admin.client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '1000', approvalThresholdUsd: '100' }, admin.auth);
  // A registry record big enough that its Resolve answer is over connect's 1 KiB compression floor.
  await upsertService(admin, { slug: 'wire-big', name: 'Big', description: 'd'.repeat(1500), paymentMethods: [{ protocol: 'x402' }] });
  session = http2.connect(s.url);
  session.on('error', () => {});
  await once(session, 'remoteSettings');
});
afterAll(async () => {
  session?.close();
  await s?.close();
});

/** Header values that differ per request or per server, as placeholders; `date` dropped. */
function normalize(headers: IncomingHttpHeaders | http.IncomingHttpHeaders): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(headers).sort()) {
    if (name === 'date') continue;
    let v = headers[name];
    if (name === 'x-request-id') v = typeof v === 'string' && /^[0-9a-z-]{16,64}$/.test(v) ? '<request-id>' : v;
    out[name] = typeof v === 'string' ? placeholders(v) : v;
  }
  return out;
}

function placeholders(text: string): string {
  return text.split(agentId).join('<agent>').split(s.bootstrap.org_id).join('<org>');
}

/** The frames of a gRPC body: flags, length, and the message (gunzipped when flagged) as bytes. */
function frames(body: Buffer): { flags: number; length: number; data: Buffer }[] {
  const out: { flags: number; length: number; data: Buffer }[] = [];
  for (let at = 0; at < body.length; ) {
    const flags = body[at]!;
    const length = body.readUInt32BE(at + 1);
    const raw = body.subarray(at + 5, at + 5 + length);
    out.push({ flags, length, data: flags & 1 ? gunzipSync(raw) : raw });
    at += 5 + length;
  }
  return out;
}

/** One gRPC frame: flag 0 (or 1 for `compressed`), 4-byte big-endian length, the bytes. */
function frame(data: Uint8Array, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(data.length, 1);
  return Buffer.concat([head, data]);
}

function encode<I extends DescMessage>(schema: I, init: MessageInitShape<I>): Buffer {
  return Buffer.from(toBinary(schema, create(schema, init)));
}

type Wire = { status: number | undefined; headers: Record<string, unknown>; trailers?: Record<string, unknown>; body: Buffer };

/** One request on the shared h2c session, body sent as given (or nothing). */
async function h2(method: string, p: string, headers: Record<string, string>, body?: Buffer): Promise<Wire> {
  const req = session.request({ ':method': method, ':path': p, ...headers });
  let head: IncomingHttpHeaders = {};
  let trailers: IncomingHttpHeaders | undefined;
  const chunks: Buffer[] = [];
  req.on('response', (h) => (head = h));
  req.on('trailers', (t) => (trailers = t));
  req.on('data', (c: Buffer) => chunks.push(c));
  req.end(body);
  await once(req, 'close');
  const { ':status': status, ...rest } = head;
  return { status: status as number | undefined, headers: normalize(rest), trailers: trailers && normalize(trailers), body: Buffer.concat(chunks) };
}

/** One HTTP/1.1 request on a fresh connection. */
function h1(method: string, p: string, headers: Record<string, string>, body?: Buffer): Promise<Wire> {
  const url = new URL(p, s.url);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { connection: 'close', ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: normalize(res.headers), body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const grpcHeaders = (extra: Record<string, string> = {}) => ({
  'content-type': 'application/grpc', te: 'trailers', authorization: `Bearer ${s.bootstrap.api_key}`, ...extra,
});

/** The gRPC answer in one object: headers, trailers, frames decoded with `output` (or JSON text). */
async function grpcCall<O extends DescMessage>(m: { name: string; output: O }, body: Buffer | undefined, headers: Record<string, string> = grpcHeaders()) {
  const w = await h2('POST', path(m), headers, body);
  // Answers that are not gRPC (the 404 fallback) are shown as text.
  if (!String(w.headers['content-type']).startsWith('application/grpc')) return { status: w.status, headers: w.headers, trailers: w.trailers, text: w.body.toString() };
  const decoded = frames(w.body).map((f) => ({
    flags: f.flags,
    message: headers['content-type']?.includes('json') ? placeholders(f.data.toString()) : placeholders(JSON.stringify(toJson(m.output, fromBinary(m.output, f.data)))),
  }));
  // grpc-status-details-bin decoded (a google.rpc.Status of paypolicy.v1.ErrorInfo details).
  const carrier = new Headers();
  for (const [k, v] of Object.entries({ ...w.headers, ...w.trailers })) if (typeof v === 'string') carrier.set(k, v);
  const err = findTrailerError(carrier);
  const details = err?.details.map((d) => ('desc' in d ? d : { type: d.type, info: placeholders(JSON.stringify(toJson(ErrorInfoSchema, fromBinary(ErrorInfoSchema, d.value)))) }));
  return { status: w.status, headers: w.headers, trailers: w.trailers, frames: decoded, details };
}

const ping = () => encode(M.ping.input, { agentId });

describe('gRPC (h2c) PaymentPolicyService', () => {
  test('behavior: a unary answer: headers, one frame, grpc-status 0 in trailers', async () => {
    expect(await grpcCall(M.ping, frame(ping()))).toMatchSnapshot();
  });

  test('behavior: application/grpc+proto is answered like application/grpc', async () => {
    expect(await grpcCall(M.ping, frame(ping()), grpcHeaders({ 'content-type': 'application/grpc+proto' }))).toMatchSnapshot();
  });

  test('behavior: application/grpc+json carries JSON frames', async () => {
    const body = frame(Buffer.from(JSON.stringify({ agentId })));
    expect(await grpcCall(M.ping, body, grpcHeaders({ 'content-type': 'application/grpc+json' }))).toMatchSnapshot();
  });

  test('behavior: grpc-accept-encoding as @grpc/grpc-js sends it: small answers stay uncompressed', async () => {
    expect(await grpcCall(M.ping, frame(ping()), grpcHeaders({ 'grpc-accept-encoding': 'identity,deflate,gzip' }))).toMatchSnapshot();
  });

  test('behavior: an answer of 1 KiB or more is gzipped when the client accepts gzip', async () => {
    const body = frame(encode(M.resolve.input, { slugs: ['wire-big'] }));
    const r = await grpcCall(M.resolve, body, grpcHeaders({ 'grpc-accept-encoding': 'identity,deflate,gzip' }));
    expect({ ...r, frames: r.frames!.map((f) => ({ flags: f.flags, length: f.message.length })) }).toMatchSnapshot();
  });

  test('behavior: a Sign answer (under 1 KiB) is not compressed; grpc-encoding names gzip all the same', async () => {
    const body = frame(encode(M.sign.input, { agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.01' }));
    const r = await grpcCall(M.sign, body, grpcHeaders({ 'grpc-accept-encoding': 'identity,deflate,gzip' }));
    expect(r.headers).toMatchSnapshot();
    expect(r.trailers).toMatchSnapshot();
    expect(r.frames!.length).toBe(1);
    const message = JSON.parse(r.frames![0]!.message) as Record<string, unknown>;
    expect({ flags: r.frames![0]!.flags, outcome: message.outcome, signature: typeof message.signature }).toMatchSnapshot();
  });

  test('behavior: a gzipped request with grpc-encoding gzip is read', async () => {
    const body = frame(gzipSync(ping()), 1);
    expect(await grpcCall(M.ping, body, grpcHeaders({ 'grpc-encoding': 'gzip' }))).toMatchSnapshot();
  });

  test('behavior: grpc-timeout is accepted', async () => {
    expect(await grpcCall(M.ping, frame(ping()), grpcHeaders({ 'grpc-timeout': '10S' }))).toMatchSnapshot();
  });

  test('error: no key is grpc-status 16 with ErrorInfo and x-error-code in trailers', async () => {
    const { authorization: _, ...noKey } = grpcHeaders();
    expect(await grpcCall(M.ping, frame(ping()), noKey as Record<string, string>)).toMatchSnapshot();
  });

  test('error: an unknown key is grpc-status 16', async () => {
    expect(await grpcCall(M.sign, frame(encode(M.sign.input, { agentId })), grpcHeaders({ authorization: 'Bearer ak_test_nope' }))).toMatchSnapshot();
  });

  test('error: a missing agent id is grpc-status 3 (invalid argument)', async () => {
    expect(await grpcCall(M.ping, frame(encode(M.ping.input, {})))).toMatchSnapshot();
  });

  test('error: no message at all', async () => {
    expect(await grpcCall(M.ping, Buffer.alloc(0))).toMatchSnapshot();
  });

  test('error: two messages for a unary method', async () => {
    expect(await grpcCall(M.ping, Buffer.concat([frame(ping()), frame(ping())]))).toMatchSnapshot();
  });

  test('error: an incomplete frame', async () => {
    expect(await grpcCall(M.ping, frame(ping()).subarray(0, 8))).toMatchSnapshot();
  });

  test('error: a frame announcing more than 256 KiB', async () => {
    const head = Buffer.from([0, 0, 0x04, 0, 1]);
    expect(await grpcCall(M.ping, Buffer.concat([head, Buffer.alloc(100)]))).toMatchSnapshot();
  });

  test('error: a compressed frame without grpc-encoding', async () => {
    expect(await grpcCall(M.ping, frame(gzipSync(ping()), 1))).toMatchSnapshot();
  });

  test('error: an unknown grpc-encoding', async () => {
    expect(await grpcCall(M.ping, frame(ping()), grpcHeaders({ 'grpc-encoding': 'snappy' }))).toMatchSnapshot();
  });

  test('error: bytes that are not the message', async () => {
    expect(await grpcCall(M.ping, frame(Buffer.from([0xff, 0xff, 0xff])))).toMatchSnapshot();
  });

  test('error: a malformed grpc-timeout', async () => {
    expect(await grpcCall(M.ping, frame(ping()), grpcHeaders({ 'grpc-timeout': 'soon' }))).toMatchSnapshot();
  });

  test('error: an unknown method and an unknown content type', async () => {
    expect(await grpcCall({ name: 'Nope', output: M.ping.output }, frame(ping()))).toMatchSnapshot();
    expect(await grpcCall(M.ping, frame(ping()), grpcHeaders({ 'content-type': 'application/grpc+xml' }))).toMatchSnapshot();
  });
});

const connectHeaders = (extra: Record<string, string> = {}) => ({
  'content-type': 'application/json', authorization: `Bearer ${s.bootstrap.api_key}`, ...extra,
});

/** A Connect answer with its body as text (JSON) or, for application/proto, as the decoded message. */
async function connectCall(
  transport: 'h1' | 'h2', m: { name: string; output: DescMessage }, body: Buffer | string | undefined, headers: Record<string, string> = connectHeaders(), method = 'POST',
) {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  const w = transport === 'h1' ? await h1(method, path(m), headers, b) : await h2(method, path(m), headers, b);
  const type = String(w.headers['content-type'] ?? '');
  const raw = w.headers['content-encoding'] === 'gzip' ? gunzipSync(w.body) : w.body;
  const text = type === 'application/proto' ? JSON.stringify(toJson(m.output, fromBinary(m.output, raw))) : raw.toString();
  return { status: w.status, headers: w.headers, trailers: w.trailers, body: placeholders(text) };
}

describe.each(['h1', 'h2'] as const)('Connect over %s PaymentPolicyService', (t) => {
  test('behavior: a JSON answer', async () => {
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId }))).toMatchSnapshot();
  });

  test('behavior: a protobuf answer', async () => {
    expect(await connectCall(t, M.ping, ping(), connectHeaders({ 'content-type': 'application/proto' }))).toMatchSnapshot();
  });

  test('behavior: charset and the protocol version header are accepted', async () => {
    const headers = connectHeaders({ 'content-type': 'application/json; charset=utf-8', 'connect-protocol-version': '1' });
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId }), headers)).toMatchSnapshot();
  });

  test('error: an unknown field, an undeclared enum name and a duplicate key are invalid_argument naming them', async () => {
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId, whatever: 1 }), connectHeaders())).toMatchSnapshot();
    expect(await connectCall(t, M.sign, JSON.stringify({ agentId, type: 'eip3009' }), connectHeaders())).toMatchSnapshot();
    expect(await connectCall(t, M.ping, `{"agentId":"${agentId}","agentId":"agt_other"}`, connectHeaders())).toMatchSnapshot();
  });

  test('behavior: an answer of 1 KiB or more is gzipped when the client accepts gzip', async () => {
    const r = await connectCall(t, M.resolve, JSON.stringify({ slugs: ['wire-big'] }), connectHeaders({ 'accept-encoding': 'gzip' }));
    // The record's id is random, so the compressed length varies by a byte or two.
    expect({ ...r, headers: { ...r.headers, 'content-length': '<n>' }, body: r.body.length }).toMatchSnapshot();
  });

  test('behavior: a gzipped request body; a Sign answer (under 1 KiB) is not compressed', async () => {
    const signBody = JSON.stringify({ agentId, type: 'PAYMENT_TYPE_EIP3009', recipientAddress: RECIPIENT, amountUsd: '0.01' });
    const r = await connectCall(t, M.sign, gzipSync(signBody), connectHeaders({ 'content-encoding': 'gzip', 'accept-encoding': 'gzip' }));
    const message = JSON.parse(r.body) as Record<string, unknown>;
    expect({ status: r.status, headers: { ...r.headers, 'content-length': '<n>' }, outcome: message.outcome }).toMatchSnapshot();
  });

  test('behavior: connect-timeout-ms is accepted', async () => {
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId }), connectHeaders({ 'connect-timeout-ms': '10000' }))).toMatchSnapshot();
  });

  test('error: no key, an unknown key', async () => {
    const { authorization: _, ...noKey } = connectHeaders();
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId }), noKey as Record<string, string>)).toMatchSnapshot();
    expect(await connectCall(t, M.sign, JSON.stringify({ agentId }), connectHeaders({ authorization: 'Bearer ak_test_nope' }))).toMatchSnapshot();
  });

  test('error: a missing agent id', async () => {
    expect(await connectCall(t, M.ping, '{}')).toMatchSnapshot();
  });

  test('error: bodies that are not the message', async () => {
    expect(await connectCall(t, M.ping, '')).toMatchSnapshot();
    expect(await connectCall(t, M.ping, '{"agentId":')).toMatchSnapshot();
    expect(await connectCall(t, M.ping, '{"agentId":7}')).toMatchSnapshot();
    expect(await connectCall(t, M.ping, Buffer.from([0xff, 0xff]), connectHeaders({ 'content-type': 'application/proto' }))).toMatchSnapshot();
  });

  test('error: a body over 256 KiB', async () => {
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId: 'x'.repeat(300 * 1024) }))).toMatchSnapshot();
  });

  test('error: an unknown content-encoding, a malformed timeout', async () => {
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId }), connectHeaders({ 'content-encoding': 'snappy' }))).toMatchSnapshot();
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId }), connectHeaders({ 'connect-timeout-ms': 'soon' }))).toMatchSnapshot();
  });

  test('error: other methods and content types', async () => {
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId }), connectHeaders(), 'PUT')).toMatchSnapshot();
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId }), connectHeaders({ 'content-type': 'text/plain' }))).toMatchSnapshot();
    expect(await connectCall(t, M.ping, JSON.stringify({ agentId }), connectHeaders({ 'content-type': 'application/connect+json' }))).toMatchSnapshot();
  });
});
