import { concatHex, hexToBytes, isAddress, keccak256, toRlp, type Address, type Hex } from 'viem';
import type { TempoFields } from './signJobs.js';

/**
 * Tempo transaction (EIP-2718 type 0x76) encoding for the signing threads.
 *
 * viem's Tempo serializer (`tempo.serializers.transaction`) is async, and `runSignJob` must stay
 * synchronous because the worker posts its result as plain data. So the handful of fields
 * paypolicy uses are RLP-encoded here, in the same field order and with the same empty-value
 * rules as viem 2.57.13 (via ox `TxEnvelopeTempo.serialize`); test/payments/tempoTransaction.test.ts
 * pins the bytes, the signing hash and the signed envelope equal to viem's for both the plain
 * and the sponsored form. Fields paypolicy never sets (access list, validAfter, authorization
 * list, key authorization, call value) are always encoded empty.
 */

const TEMPO_TX_TYPE: Hex = '0x76';
/** Sponsored hand-off envelope: the fee payer recognises it by this prefix and the sender slot. */
const FEE_PAYER_HANDOFF_TYPE: Hex = '0x78';
/** In the signing preimage of a sponsored tx the fee-payer slot holds this one-byte marker. */
const FEE_PAYER_PRESIGN_MARKER: Hex = '0x00';
const EMPTY: Hex = '0x';
const UINT256_LIMIT = 1n << 256n;

/** Minimal big-endian bytes, empty for zero: the RLP integer form. */
function rlpUint(value: bigint | number): Hex {
  const v = BigInt(value);
  if (v < 0n || v >= UINT256_LIMIT) throw new RangeError('uint256 out of range');
  if (v === 0n) return EMPTY;
  const hex = v.toString(16);
  return `0x${hex.length % 2 === 0 ? hex : `0${hex}`}`;
}

function assertFields(tx: TempoFields): void {
  // viem encodes a numeric chainId / validBefore of 0 as a 0x00 byte rather than empty; neither
  // is meaningful, so refusing them keeps this encoder's empty-for-zero rule exact.
  if (!Number.isSafeInteger(tx.chainId) || tx.chainId <= 0) throw new RangeError('chainId must be a positive integer');
  if (!Number.isSafeInteger(tx.validBefore) || tx.validBefore <= 0) throw new RangeError('validBefore must be a positive integer');
  if (tx.calls.length === 0) throw new RangeError('a Tempo transaction needs at least one call');
  for (const call of tx.calls) if (!isAddress(call.to, { strict: false })) throw new RangeError('call target is not an address');
  if (tx.sponsored && tx.feeToken !== undefined) throw new RangeError('a sponsored transaction names no fee token');
}

function encode(tx: TempoFields, feePayerSlot: Hex, signature?: Hex): Hex {
  const fields: Array<Hex | Hex[] | Hex[][]> = [
    rlpUint(tx.chainId),
    rlpUint(tx.maxPriorityFeePerGas),
    rlpUint(tx.maxFeePerGas),
    rlpUint(tx.gas),
    tx.calls.map((call) => [call.to, EMPTY, call.data]),
    [],
    rlpUint(tx.nonceKey),
    rlpUint(tx.nonce),
    rlpUint(tx.validBefore),
    EMPTY,
    tx.feeToken ?? EMPTY,
    feePayerSlot,
    [],
  ];
  if (signature !== undefined) fields.push(signature);
  return toRlp(fields, 'hex');
}

/** The 32-byte digest the sender signs: keccak256 of the unsigned envelope, as viem's signTransaction hashes it. */
export function tempoSigningHash(tx: TempoFields): Uint8Array {
  assertFields(tx);
  return keccak256(concatHex([TEMPO_TX_TYPE, encode(tx, tx.sponsored ? FEE_PAYER_PRESIGN_MARKER : EMPTY)]), 'bytes');
}

/**
 * The signed envelope to hand to the server: 0x76 with the signature appended, or for a sponsored
 * tx the 0x78 hand-off form that carries the sender's address where the fee payer will sign.
 */
export function serializeSignedTempoTransaction(tx: TempoFields, signature: Hex, sender: Address): Hex {
  assertFields(tx);
  if (hexToBytes(signature).length !== 65) throw new RangeError('expected a 65-byte signature');
  if (tx.sponsored) return concatHex([FEE_PAYER_HANDOFF_TYPE, encode(tx, sender, signature)]);
  return concatHex([TEMPO_TX_TYPE, encode(tx, EMPTY, signature)]);
}
