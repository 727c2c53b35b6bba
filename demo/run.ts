import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createClient, createPayingFetch, type PaidResponse } from '@paypolicy/client';
import { MPP_RECIPIENT, X402_PAY_TO, startMppPaywall, startX402Paywall } from './paywalls.js';

/**
 * `npm run demo`: paypolicy paying two local paywalls, end to end, as an agent would. Starts a
 * server on a fresh data directory (removed at the end), an x402 and an MPP paywall on loopback
 * (demo/paywalls.ts), gives the demo agent a policy with the admin CLI, then pays with the
 * client's paying fetch and with its MCP server's `pay_and_fetch` tool, and lists the ledger.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(root, 'bin/paypolicy.js');
const MCP_BIN = join(root, 'clients/typescript/dist/bin.js');
const say = (text = '') => process.stdout.write(`${text}\n`);

const x402 = await startX402Paywall();
const mpp = await startMppPaywall();
const dataDir = mkdtempSync(join(tmpdir(), 'paypolicy-demo-'));
// Development mode lets quotes and signs probe http:// paywalls; the two loopback paywalls are
// exempted from the private-address block, and from nothing else.
const server = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--data-dir', dataDir, '--dev', '--log-level', 'warn'], {
  env: { ...process.env, PAYPOLICY_PROBE_ALLOW_HOSTS: `${x402.host},${mpp.host}` },
  stdio: ['ignore', 'pipe', 'inherit'],
});
let mcp: Client | undefined;
try {
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const found = /curl -s -X POST (http:\/\/127\.0\.0\.1:\d+)\/api\/ping/.exec(out);
      if (found) resolve(found[1]!);
    });
    server.once('exit', (code) => reject(new Error(`paypolicy exited (${code}) before it listened`)));
  });
  const boot = JSON.parse(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')) as { org_id: string; api_key: string; agent_id: string };
  say(`paypolicy on ${url} (data in ${dataDir}), an x402 paywall on ${x402.url} and an MPP paywall on ${mpp.url}.`);
  say('The chain is simulated; every signature is real and checked by the paywalls\' own packages.');

  const cli = (...args: string[]) => execFileSync(process.execPath, [CLI, ...args, '--url', url, '--data-dir', dataDir], { encoding: 'utf8' }).trim();
  say('\n1. The operator lets the demo agent pay both paywalls, up to $10 a day, with approval above $1:');
  say(`   $ paypolicy policy set --agent ${boot.agent_id} --allow ${X402_PAY_TO} --allow ${MPP_RECIPIENT} --cap 10 --threshold 1`);
  cli('policy', 'set', '--agent', boot.agent_id, '--allow', X402_PAY_TO, '--allow', MPP_RECIPIENT, '--cap', '10', '--threshold', '1');

  const client = createClient({ baseUrl: url, apiKey: boot.api_key });
  const payingFetch = createPayingFetch({ client, agentId: boot.agent_id, maxAmountUsd: '0.05' });
  const show = async (what: string, response: PaidResponse) => {
    say(`   ${what}: ${response.status} ${await response.text()}`);
    const p = response.payment;
    if (p) say(`   paid $${p.amountUsd} over ${p.rail}, ledger row ${p.transactionId}`);
  };
  say('\n2. The agent\'s paying fetch (@paypolicy/client), at most $0.05 a call:');
  await show(`GET ${x402.url}/weather`, await payingFetch(`${x402.url}/weather`));
  await show(`GET ${mpp.url}/quote`, await payingFetch(`${mpp.url}/quote`));

  say('\n3. The same through the MCP server an agent host runs (paypolicy-client mcp), tool pay_and_fetch:');
  mcp = new Client({ name: 'paypolicy-demo', version: '1.0.0' });
  await mcp.connect(new StdioClientTransport({
    command: process.execPath,
    args: [MCP_BIN, 'mcp'],
    env: {
      PATH: process.env.PATH ?? '', PAYPOLICY_URL: url, PAYPOLICY_API_KEY: boot.api_key, PAYPOLICY_AGENT_ID: boot.agent_id,
      PAYPOLICY_MAX_AMOUNT_USD: '0.05', PAYPOLICY_MCP_ALLOW_HTTP: '1', PAYPOLICY_MCP_ALLOW_HOSTS: `${x402.host},${mpp.host}`,
    },
  }));
  const result = (await mcp.callTool({ name: 'pay_and_fetch', arguments: { url: `${x402.url}/weather` } })) as CallToolResult;
  const text = result.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  if (result.isError) say(`   tool error: ${text}`);
  else {
    const answer = JSON.parse(text) as { status: number; body: string; payment: { amountUsd: string; rail: string; transactionId: string } | null };
    say(`   pay_and_fetch ${x402.url}/weather: ${answer.status} ${answer.body}`);
    if (answer.payment) say(`   paid $${answer.payment.amountUsd} over ${answer.payment.rail}, ledger row ${answer.payment.transactionId}`);
  }

  const spend = await client.spendStatus(boot.agent_id);
  say(`\n4. What the agent may still spend today: $${spend.remaining_usd} of $${spend.spend_cap_usd}. The ledger:`);
  say(cli('tx', 'list', '--org', boot.org_id).split('\n').map((line) => `   ${line}`).join('\n'));
  if (result.isError) process.exitCode = 1;
} finally {
  await mcp?.close();
  server.kill('SIGTERM');
  await new Promise((resolve) => (server.exitCode !== null ? resolve(undefined) : server.once('exit', resolve)));
  await Promise.all([x402.close(), mpp.close()]);
  rmSync(dataDir, { recursive: true, force: true });
}
