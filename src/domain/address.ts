import { getAddress, type Address } from 'viem';

/** How many addresses checksumAddress remembers before it starts over. */
const REMEMBERED = 4096;
const remembered = new Map<string, Address>();

/**
 * viem's getAddress (the EIP-55 checksummed form; throws on anything that is not an address),
 * remembered by its input. Why: every signed payment checksums the same few addresses (its
 * treasury, its recipient) three times, and viem's own caches are LRU maps that re-insert the key
 * on every hit and build two key strings per call: 0.62 µs a call against 0.01 µs here (measured
 * on the bench machine). Inputs come from agents, so the memory is bounded: it is emptied when full.
 */
export function checksumAddress(value: string): Address {
  let address = remembered.get(value);
  if (address === undefined) {
    address = getAddress(value);
    if (remembered.size >= REMEMBERED) remembered.clear();
    remembered.set(value, address);
  }
  return address;
}
