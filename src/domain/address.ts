import { getAddress, type Address } from 'viem';

/**
 * The EIP-55 checksummed form of an address (viem's getAddress; throws on anything that is not an
 * address). One name for it, so every surface writes addresses the same way.
 */
export function checksumAddress(value: string): Address {
  return getAddress(value);
}
