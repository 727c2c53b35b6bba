// Compiles test/fixtures/MiniUSDC.sol with the pinned solc-js (devDependency) into
// test/fixtures/MiniUSDC.json ({ compiler, evmVersion, abi, bytecode }; the constructor takes the
// EIP-712 domain name, see test/helpers/localChain.ts installMiniUsdc). Run after editing the source:
//   node scripts/compile-fixtures.mjs
// The JSON is committed so tests need no compiler (compiling costs 1-2 s).
import { readFileSync, writeFileSync } from 'node:fs';
import solc from 'solc';

const source = readFileSync(new URL('../test/fixtures/MiniUSDC.sol', import.meta.url), 'utf8');
const input = {
  language: 'Solidity',
  sources: { 'MiniUSDC.sol': { content: source } },
  settings: { evmVersion: 'paris', optimizer: { enabled: true, runs: 200 }, outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } },
};
const out = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (out.errors ?? []).filter((e) => e.severity === 'error');
if (errors.length > 0) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
const c = out.contracts['MiniUSDC.sol'].MiniUSDC;
const fixture = { compiler: solc.version(), evmVersion: 'paris', abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
writeFileSync(new URL('../test/fixtures/MiniUSDC.json', import.meta.url), `${JSON.stringify(fixture, null, 1)}\n`);
console.log(`MiniUSDC: ${c.evm.bytecode.object.length / 2} bytes of creation code (${solc.version()})`);
