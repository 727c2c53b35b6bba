// Extracts Uniswap Permit2's creation bytecode and ABI from @uniswap/uniswapx-sdk into
// test/fixtures/Permit2.json, once. The package is not a dependency (56 packages with ethers v5
// for one constant); to regenerate:
//   cd /tmp && npm pack @uniswap/uniswapx-sdk@3.1.0 && tar xzf uniswap-uniswapx-sdk-3.1.0.tgz
//   node scripts/extract-permit2.mjs /tmp/package
// The creation code is byte-identical to the canonical deployment: deployed through the
// deterministic-deployment proxy with Uniswap's salt it lands at 0x000000000022D473030F116dDEE9F6B43aC78BA3
// (test/helpers/localChain.ts installPermit2 checks that address before using it).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runInNewContext } from 'node:vm';
import { keccak256 } from 'viem';

const PACKAGE = '@uniswap/uniswapx-sdk';
const FILE = 'dist/cjs/src/contracts/factories/Permit2__factory.js';
const dir = process.argv[2];
if (!dir) throw new Error('usage: node scripts/extract-permit2.mjs <unpacked uniswapx-sdk package directory>');

const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
if (pkg.name !== PACKAGE) throw new Error(`${dir} holds ${pkg.name}, not ${PACKAGE}`);
const source = readFileSync(join(dir, FILE), 'utf8');
// The file is typechain output that requires ethers; only its two literals are read, and the ABI
// literal (unquoted keys) is evaluated alone in an empty context, never the module.
const abiText = /const _abi = (\[[\s\S]*?\n\]);\nconst _bytecode/.exec(source)?.[1];
const bytecode = /const _bytecode = "(0x[0-9a-f]+)";/.exec(source)?.[1];
if (!abiText || !bytecode) throw new Error(`${FILE}: _abi or _bytecode not found`);
const abi = JSON.parse(JSON.stringify(runInNewContext(`(${abiText})`, Object.create(null))));

const fixture = {
  origin: { package: PACKAGE, version: pkg.version, file: FILE, bytecodeKeccak256: keccak256(bytecode) },
  abi,
  bytecode,
};
writeFileSync(new URL('../test/fixtures/Permit2.json', import.meta.url), `${JSON.stringify(fixture, null, 1)}\n`);
console.log(`Permit2 from ${PACKAGE}@${pkg.version}: ${(bytecode.length - 2) / 2} bytes of creation code, keccak ${fixture.origin.bytecodeKeccak256}`);
