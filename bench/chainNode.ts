import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';

/**
 * The local EVM of the bench's submit phase, in a process of its own so the chain's work is not
 * counted against the load generator's event loop: the tests' EDR helper (test/helpers/localChain.ts,
 * compiled to dist/test/helpers by `npm run build` because this file imports it) serving an
 * chain on 127.0.0.1. Prints `listening PORT`; then, for each `fund TREASURY USDC` line on
 * stdin, gives the treasury gas, puts MiniUSDC at USDC's address, mints to the treasury and
 * prints `funded`. Ends when stdin closes.
 *
 * Once funded, the chain mines a block every BLOCK_MS instead of one per transaction, like a real
 * chain: an automining EDR refuses a transaction whose nonce is ahead of the account's ("can't be
 * queued when automining"), and the service's concurrent payments reach the node slightly out of
 * nonce order, which a real node's mempool queues.
 */

const BLOCK_MS = 250;

const CHAIN_ID = Number(process.argv[2] ?? 84532);
const root = fileURLToPath(new URL('../..', import.meta.url));

// The helper loads its contract fixtures (JSON) relative to itself: the compiled copy needs them beside it.
const helper = fileURLToPath(new URL('../test/helpers/localChain.js', import.meta.url));
const fixtures = join(dirname(helper), '../fixtures');
mkdirSync(fixtures, { recursive: true });
for (const f of readdirSync(join(root, 'test/fixtures'))) if (f.endsWith('.json')) copyFileSync(join(root, 'test/fixtures', f), join(fixtures, f));
const { createLocalChain, installMiniUsdc } = await import('../test/helpers/localChain.js');

const deployerKey = generatePrivateKey();
const chain = await createLocalChain({ chainId: CHAIN_ID, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 22n }] });
const node = await chain.listen(0);
process.stdout.write(`listening ${node.port}\n`);

let mining: NodeJS.Timeout | undefined;
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const [cmd, treasury, usdc] = line.trim().split(/\s+/) as [string, Address, Address];
  if (cmd !== 'fund') return;
  void (async () => {
    // Plenty of gas (10^24 wei) and a million USDC: no run can spend either.
    await chain.rpc('hardhat_setBalance', [treasury, `0x${(10n ** 24n).toString(16)}`]);
    await installMiniUsdc(chain, usdc, deployerKey, [{ to: treasury, amount: 1_000_000_000_000n }]);
    await chain.rpc('evm_setAutomine', [false]);
    mining ??= setInterval(() => void chain.rpc('evm_mine', []).catch(() => {}), BLOCK_MS);
    process.stdout.write('funded\n');
  })().catch((err: unknown) => {
    process.stderr.write(`funding failed: ${String((err as Error).message)}\n`);
    process.exit(1);
  });
});
lines.on('close', () => {
  clearInterval(mining);
  void node.close().then(() => process.exit(0));
});
