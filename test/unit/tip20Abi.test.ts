import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { bytesToHex, encodeFunctionData, toFunctionSelector, type AbiFunction } from 'viem';
import { Abis } from 'viem/tempo';
import { tip20TransferAbi } from '../../src/signing/tip20Abi.js';

const TO = '0x2222222222222222222222222222222222222222';

function fromViem(name: string): AbiFunction {
  return Abis.tip20.find((item) => item.type === 'function' && item.name === name) as AbiFunction;
}

describe('tip20TransferAbi', () => {
  test('behavior: transfer and transferWithMemo are the same functions as viem/tempo Abis.tip20 (selector, inputs, outputs)', () => {
    for (const entry of tip20TransferAbi) {
      const theirs = fromViem(entry.name);
      expect(entry).toEqual(theirs);
      expect(toFunctionSelector(entry)).toBe(toFunctionSelector(theirs));
    }
    expect(toFunctionSelector(tip20TransferAbi[0])).toBe('0xa9059cbb');
  });

  test('behavior: calls encode byte for byte as with Abis.tip20', () => {
    for (const amount of [0n, 1n, 10_000n, 2n ** 256n - 1n]) {
      const memo = bytesToHex(randomBytes(32));
      expect(encodeFunctionData({ abi: tip20TransferAbi, functionName: 'transfer', args: [TO, amount] }))
        .toBe(encodeFunctionData({ abi: Abis.tip20, functionName: 'transfer', args: [TO, amount] }));
      expect(encodeFunctionData({ abi: tip20TransferAbi, functionName: 'transferWithMemo', args: [TO, amount, memo] }))
        .toBe(encodeFunctionData({ abi: Abis.tip20, functionName: 'transferWithMemo', args: [TO, amount, memo] }));
    }
  });

  test('behavior: nothing under src/ imports viem/tempo (its module graph is 12.9 MB of heap kept live in the server)', () => {
    const root = fileURLToPath(new URL('../../src', import.meta.url));
    const importers = (readdirSync(root, { recursive: true }) as string[])
      .filter((file) => file.endsWith('.ts'))
      .filter((file) => /from\s+['"]viem\/tempo['"]|import\(\s*['"]viem\/tempo['"]/.test(readFileSync(join(root, file), 'utf8')));
    expect(importers).toEqual([]);
  });
});
