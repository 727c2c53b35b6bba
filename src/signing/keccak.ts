import { keccak256 as viemKeccak256 } from 'viem';
import { keccakF1600 } from './keccakF1600.js';

/**
 * Keccak-256 (the pre-FIPS padding Ethereum uses) over the unrolled permutation in keccakF1600.ts,
 * for the digests the signing threads build per payment (two per EIP-3009 signature). The state's
 * bytes are the lanes' little-endian bytes, so on a little-endian machine blocks are XORed straight
 * into a byte view of the words; anywhere else viem's implementation is used.
 */
const RATE = 136;
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

const state = new Int32Array(50);
const bytes = new Uint8Array(state.buffer);

function unrolledKeccak256(data: Uint8Array): Uint8Array {
  state.fill(0);
  let at = 0;
  for (; at + RATE <= data.length; at += RATE) {
    for (let i = 0; i < RATE; i++) bytes[i]! ^= data[at + i]!;
    keccakF1600(state);
  }
  const tail = data.length - at;
  for (let i = 0; i < tail; i++) bytes[i]! ^= data[at + i]!;
  // pad10*1 with Keccak's domain bit: 0x01 after the message, 0x80 on the block's last byte.
  bytes[tail]! ^= 0x01;
  bytes[RATE - 1]! ^= 0x80;
  keccakF1600(state);
  return bytes.slice(0, 32);
}

export const keccak256: (data: Uint8Array) => Uint8Array = LITTLE_ENDIAN ? unrolledKeccak256 : (data) => viemKeccak256(data, 'bytes');
