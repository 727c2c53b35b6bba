import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { PaymentType, SignOutcome, SignRequestSchema, SignResponseSchema } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { percentileOfSorted, QUANTILE_PERCENTS } from './interleave.js';

/**
 * gRPC load for the bench's `grpc` phase: PaymentPolicyService/Sign over HTTP/2 (h2c) with a real
 * gRPC client (@grpc/grpc-js), `concurrency` calls always outstanding, spread over `channels`
 * connections. Runs in its own process so the client's JavaScript does not share the server's
 * thread (nor the bench runner's). Every answer must be OK with outcome ALLOWED and a signature,
 * or it counts as failed.
 *
 * Args: <host:port> <spec.json: {apiKey, agents, recipient}> <concurrency> <channels>
 * One process serves every slice of the bench's interleaved phases (bench/interleave.ts), so its
 * connections and JIT warm up once. It reads commands on stdin, one per line:
 * - `warm <seconds>`: calls without measuring, then prints `WARM`;
 * - `run <seconds>`: prints `MEASURING` as the measured window opens (the bench counts the
 *   server's CPU from there), then `RESULT <json>` with rps, p50/p99 ms, failed, total, seconds
 *   measured, the latencies (ms) at QUANTILE_PERCENTS, and the client's own CPU: clientCpu (cores
 *   this process used over the window) and clientUsPerCall (µs of CPU per call).
 * It exits when stdin closes.
 */
const [target, specPath, concurrencyArg, channelsArg] = process.argv.slice(2);
const spec = JSON.parse(readFileSync(specPath!, 'utf8')) as { apiKey: string; agents: string[]; recipient: string };
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

let next = 0;

/** Keeps `concurrency` calls outstanding for `seconds`; the latencies (ms) and failures when `record`. */
async function drive(seconds: number, record: boolean): Promise<{ latencies: number[]; failed: number }> {
  const latencies: number[] = [];
  let failed = 0;
  const end = performance.now() + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      const started = performance.now();
      const ok = await call(next++);
      if (!record) continue;
      latencies.push(performance.now() - started);
      if (!ok) failed++;
    }
  }));
  return { latencies, failed };
}

async function measure(seconds: number): Promise<void> {
  process.stdout.write('MEASURING\n');
  const start = performance.now();
  const cpuBefore = process.cpuUsage();
  const { latencies, failed } = await drive(seconds, true);
  const elapsed = (performance.now() - start) / 1000;
  const total = latencies.length;
  // The client's own CPU (user + system) over the measured window, as a share of one core and per
  // call: the generator shares the machine's cores with the server (wrk, in C, takes far less).
  const cpu = process.cpuUsage(cpuBefore);
  const clientCpu = Math.round(((cpu.user + cpu.system) / 1e6 / elapsed) * 100) / 100;
  const clientUsPerCall = Math.round((cpu.user + cpu.system) / Math.max(1, total));
  process.stderr.write(`grpc client: ${clientCpu} core(s) of CPU, ${clientUsPerCall} µs per call\n`);
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => Math.round(percentileOfSorted(latencies, p) * 10) / 10;
  const quantiles = QUANTILE_PERCENTS.map((p) => Math.round(percentileOfSorted(latencies, p) * 1000) / 1000);
  process.stdout.write(`RESULT ${JSON.stringify({ rps: total / elapsed, p50: pct(50), p99: pct(99), failed, total, seconds: elapsed, quantiles, clientCpu, clientUsPerCall })}\n`);
}

// One command at a time, in order.
let queue = Promise.resolve();
createInterface({ input: process.stdin })
  .on('line', (line) => {
    const [cmd, arg] = line.trim().split(/\s+/);
    const seconds = Number(arg);
    queue = queue.then(async () => {
      if (cmd === 'warm') {
        await drive(seconds, false);
        process.stdout.write('WARM\n');
      } else if (cmd === 'run') {
        await measure(seconds);
      }
    });
  })
  .on('close', () => void queue.then(() => {
    for (const c of clients) c.close();
  }));
