import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { bytesToHex, keccak256 as viemKeccak256, toBytes } from 'viem';
import { keccak256 } from '../../src/signing/keccak.js';

describe('keccak256 over the unrolled permutation', () => {
  test('known answers: the empty string and a typed-data type string', () => {
    expect(bytesToHex(keccak256(new Uint8Array(0)))).toBe('0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470');
    // EIP-3009's TRANSFER_WITH_AUTHORIZATION_TYPEHASH as USDC's contract declares it.
    expect(bytesToHex(keccak256(toBytes('TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)'))))
      .toBe('0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267');
  });

  test('equals viem for every length from 0 to 600 bytes (every padding position, one to five blocks)', () => {
    for (let n = 0; n <= 600; n++) {
      const data = randomBytes(n);
      expect(bytesToHex(keccak256(data)), `length ${n}`).toBe(viemKeccak256(data));
    }
  });

  test('each result is a fresh array: a later digest does not change an earlier one', () => {
    const first = keccak256(toBytes('a'));
    const copy = bytesToHex(first);
    keccak256(toBytes('b'));
    expect(bytesToHex(first)).toBe(copy);
  });
});
