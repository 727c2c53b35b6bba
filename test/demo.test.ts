import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

/**
 * `npm run demo` as the README shows it: the built demo pays the local x402 and MPP paywalls with
 * the paying fetch and the MCP server, and the ledger it prints holds the three payments.
 */
const DEMO = fileURLToPath(new URL('../dist/demo/run.js', import.meta.url));

test('behavior: the demo pays both paywalls through the paying fetch and the MCP server, and its ledger shows the three payments', async () => {
  const child = spawn(process.execPath, [DEMO], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => void (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => void (err += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  expect(code, err + out).toBe(0);
  expect(out).toMatch(/GET http:\/\/127\.0\.0\.1:\d+\/weather: 200 \{"city":"Lisbon"/);
  expect(out).toMatch(/paid \$0\.01 over x402, ledger row [0-9a-f-]{36}/);
  expect(out).toMatch(/GET http:\/\/127\.0\.0\.1:\d+\/quote: 200 \{"quote":/);
  expect(out).toMatch(/paid \$0\.02 over mpp, ledger row [0-9a-f-]{36}/);
  expect(out).toMatch(/pay_and_fetch http:\/\/127\.0\.0\.1:\d+\/weather: 200 /);
  expect(out).toContain('What the agent may still spend today: $9.96 of $10.');
  const ledgerIds = [...out.matchAll(/ledger row ([0-9a-f-]{36})/g)].map((m) => m[1]!);
  expect(ledgerIds).toHaveLength(3);
  const ledger = out.slice(out.indexOf('The ledger:'));
  for (const id of ledgerIds) expect(ledger).toMatch(new RegExp(`${id}\\s+agt_\\w+\\s+(x402|mpp)\\s+signed`));
  // No secret of the demo's organization is printed.
  expect(out + err).not.toMatch(/ppadm_|ak_test_/);
}, 120_000);
