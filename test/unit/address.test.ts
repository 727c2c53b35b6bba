import { getAddress } from 'viem';
import { describe, expect, test } from 'vitest';
import { checksumAddress } from '../../src/domain/address.js';

describe('checksumAddress', () => {
  test('behavior: the EIP-55 form viem gives, whatever the case of the input, again on a repeat', () => {
    const inputs = ['0x2096abcdef0123456789abcdef0123456789287c', '0x2096ABCDEF0123456789ABCDEF0123456789287C', '0x2096ABCdeF0123456789AbcDEf0123456789287C'];
    for (const input of inputs) {
      expect(checksumAddress(input)).toBe('0x2096ABCdeF0123456789AbcDEf0123456789287C');
      expect(checksumAddress(input)).toBe(getAddress(input));
    }
  });

  test('error: anything that is not an address throws as getAddress does, every time', () => {
    for (const bad of ['0x2096', 'not an address', '0x2096abcdef0123456789abcdef0123456789287g']) {
      expect(() => getAddress(bad)).toThrow();
      expect(() => checksumAddress(bad)).toThrow();
      expect(() => checksumAddress(bad)).toThrow();
    }
  });

  test('property: many distinct addresses each get their own checksum', () => {
    for (let i = 0; i < 10_000; i++) {
      const address = `0x${i.toString(16).padStart(40, '0')}`;
      expect(checksumAddress(address)).toBe(getAddress(address));
    }
    expect(checksumAddress('0x0000000000000000000000000000000000000001')).toBe(getAddress('0x0000000000000000000000000000000000000001'));
  });
});
