import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { PaymentType, SignOutcome, SignRequestSchema, SignResponseSchema } from '../gen/paypolicy/v1/payment_policy_pb.js';

/**
 * gRPC load for the bench's `grpc` phase: PaymentPolicyService/Sign over HTTP/2 (h2c) with a real
 * gRPC client (@grpc/grpc-js), `concurrency` calls always outstanding, spread over `channels`
 * connections. Runs in its own process so the client's JavaScript does not share the server's
 * thread (nor the bench runner's). Every answer must be OK with outcome ALLOWED and a signature,
 * or it counts as failed.
 *
 * Args: <host:port> <spec.json: {apiKey, agents, recipient}> <seconds> <concurrency> <channels>
 * Prints `RESULT <json>` with rps, p50/p99 ms, failed, total, and the client's own CPU: clientCpu (cores
 * this process used over the measured window) and clientUsPerCall (µs of CPU per call).
 */
const [target, specPath, secondsArg, concurrencyArg, channelsArg] = process.argv.slice(2);
const spec = JSON.parse(readFileSync(specPath!, 'utf8')) as { apiKey: string; agents: string[]; recipient: string };
const seconds = Number(secondsArg ?? 10);
const concurrency = Number(concurrencyArg ?? 64);
const channels = Number(channelsArg ?? 4);

// Bodies encoded once: the generator measures the server, not protobuf encoding in this process.
const bodies = spec.agents.map((agentId) => Buffer.from(toBinary(SignRequestSchema, create(SignRequestSchema, {
  agentId, type: PaymentType.EIP3009, recipientAddress: spec.recipient, amountUsd: '0.01',
}))));
const metadata = new grpc.Metadata();
metadata.set('authorization', `Bearer ${spec.apiKey}`);
// A local subchannel pool per client, so each client is its own TCP connection.
const clients = Array.from({ length: channels }, () => new grpc.Client(target!, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }));
const identity = (b: Buffer) => b;
const decode = (b: Buffer) => fromBinary(SignResponseSchema, b);

function call(i: number): Promise<boolean> {
  return new Promise((resolve) => {
    clients[i % channels]!.makeUnaryRequest('/paypolicy.v1.PaymentPolicyService/Sign', identity, decode, bodies[i % bodies.length]!, metadata, (err, res) => {
      resolve(!err && res !== undefined && res.outcome === SignOutcome.ALLOWED && res.signature !== '');
    });
  });
}

let failed = 0;
let total = 0;
let next = 0;
const latencies: number[] = [];
async function loop(measuring: () => boolean, record: boolean): Promise<void> {
  while (measuring()) {
    const started = performance.now();
    const ok = await call(next++);
    if (!record) continue;
    latencies.push(performance.now() - started);
    total++;
    if (!ok) failed++;
  }
}

// Warm-up (connections, JIT on both sides), then the measured window.
const warmEnd = performance.now() + 2000;
await Promise.all(Array.from({ length: concurrency }, () => loop(() => performance.now() < warmEnd, false)));
const start = performance.now();
const cpuBefore = process.cpuUsage();
const end = start + seconds * 1000;
await Promise.all(Array.from({ length: concurrency }, () => loop(() => performance.now() < end, true)));
const elapsed = (performance.now() - start) / 1000;
// The client's own CPU (user + system) over the measured window, as a share of one core and per
// call: the generator shares the machine's cores with the server (wrk, in C, takes far less).
const cpu = process.cpuUsage(cpuBefore);
const clientCpu = Math.round(((cpu.user + cpu.system) / 1e6 / elapsed) * 100) / 100;
const clientUsPerCall = Math.round((cpu.user + cpu.system) / Math.max(1, total));
process.stderr.write(`grpc client: ${clientCpu} core(s) of CPU, ${clientUsPerCall} µs per call\n`);
latencies.sort((a, b) => a - b);
const pct = (p: number) => Math.round((latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? NaN) * 10) / 10;
process.stdout.write(`RESULT ${JSON.stringify({ rps: total / elapsed, p50: pct(0.5), p99: pct(0.99), failed, total, clientCpu, clientUsPerCall })}\n`);
for (const c of clients) c.close();
