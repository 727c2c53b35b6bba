import { hashDomain, hashTypedData, hexToBytes, keccak256, toBytes, type Address, type Hex, type TypedDataDomain } from 'viem';

/**
 * EIP-712 digests for what the treasury signs. EIP-3009 is on the hot path, so its struct hash is
 * encoded by hand over a cached domain separator (tests pin it equal to viem's hashTypedData);
 * the rarer types go through viem directly. Kept by hand because it is measured: viem's
 * hashTypedData took about 5× as long per EIP-3009 digest, on the signing thread (docs/performance.md).
 */

export const EIP3009_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

export type Eip3009Domain = { name: string; version: string; chainId: number; verifyingContract: Address };
export type Eip3009Message = { from: Address; to: Address; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex };

const EIP3009_TYPEHASH = hexToBytes(
  keccak256(toBytes('TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)')),
);

/**
 * Domain separators remembered, oldest first out. The domain comes from the paywall's challenge, so
 * the number of distinct ones is the remote side's choice: bounded, real tokens are a handful.
 */
export const DOMAIN_SEPARATORS_KEPT = 256;
const domainSeparators = new Map<string, Uint8Array>();

/** How many domain separators are remembered now (at most DOMAIN_SEPARATORS_KEPT). */
export function domainSeparatorsKept(): number {
  return domainSeparators.size;
}

function domainSeparator(domain: TypedDataDomain & { name: string }): Uint8Array {
  const key = `${domain.name}\u0000${domain.version ?? ''}\u0000${domain.chainId}\u0000${domain.verifyingContract}`;
  let sep = domainSeparators.get(key);
  if (!sep) {
    if (domainSeparators.size >= DOMAIN_SEPARATORS_KEPT) domainSeparators.delete(domainSeparators.keys().next().value!);
    const fields = [
      { name: 'name', type: 'string' },
      ...(domain.version === undefined ? [] : [{ name: 'version', type: 'string' }]),
      { name: 'chainId', type: 'uint256' },
      { name: 'verifyingContract', type: 'address' },
    ];
    sep = hexToBytes(hashDomain({ domain, types: { EIP712Domain: fields } } as Parameters<typeof hashDomain>[0]));
    domainSeparators.set(key, sep);
  }
  return sep;
}

function putUint256(buf: Uint8Array, offset: number, value: bigint): void {
  if (value < 0n || value >= 1n << 256n) throw new RangeError('uint256 out of range');
  for (let i = 31; i >= 0; i--) {
    buf[offset + i] = Number(value & 0xffn);
    value >>= 8n;
  }
}

function putHex(buf: Uint8Array, offset: number, hex: Hex, bytes: number): void {
  const raw = hexToBytes(hex);
  if (raw.length !== bytes) throw new RangeError(`expected ${bytes} bytes`);
  buf.set(raw, offset + 32 - bytes);
}

/** keccak256(0x1901 ‖ domainSeparator ‖ hashStruct(TransferWithAuthorization)). */
export function eip3009Digest(domain: Eip3009Domain, m: Eip3009Message): Uint8Array {
  const struct = new Uint8Array(32 * 7);
  struct.set(EIP3009_TYPEHASH, 0);
  putHex(struct, 32, m.from, 20);
  putHex(struct, 64, m.to, 20);
  putUint256(struct, 96, m.value);
  putUint256(struct, 128, m.validAfter);
  putUint256(struct, 160, m.validBefore);
  putHex(struct, 192, m.nonce, 32);
  const outer = new Uint8Array(66);
  outer[0] = 0x19;
  outer[1] = 0x01;
  outer.set(domainSeparator(domain), 2);
  outer.set(keccak256(struct, 'bytes'), 34);
  return keccak256(outer, 'bytes');
}

/** Permit2 witness transfer as used by x402 `exact`: the witness binds the recipient. */
export const PERMIT2_WITNESS_TYPES = {
  PermitWitnessTransferFrom: [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'witness', type: 'Witness' },
  ],
  TokenPermissions: [
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint256' },
  ],
  Witness: [
    { name: 'to', type: 'address' },
    { name: 'validAfter', type: 'uint256' },
  ],
} as const;

export type Permit2Message = {
  permitted: { token: Address; amount: bigint };
  spender: Address;
  nonce: bigint;
  deadline: bigint;
  witness: { to: Address; validAfter: bigint };
};

export function permit2Domain(chainId: number, verifyingContract: Address) {
  return { name: 'Permit2', chainId, verifyingContract } as const;
}

export function permit2Digest(chainId: number, permit2: Address, message: Permit2Message): Uint8Array {
  return hexToBytes(
    hashTypedData({ domain: permit2Domain(chainId, permit2), types: PERMIT2_WITNESS_TYPES, primaryType: 'PermitWitnessTransferFrom', message }),
  );
}
