/**
 * The two TIP-20 functions paypolicy encodes for Tempo payments: `transfer(address,uint256)` and
 * `transferWithMemo(address,uint256,bytes32)`, exactly as in viem/tempo's `Abis.tip20`
 * (test/signing/tip20Abi.test.ts pins the selectors and encodings against it).
 *
 * Why not `Abis.tip20` itself: importing `viem/tempo` evaluates its whole module graph (the Tempo
 * ABIs, accounts, P256/WebAuthn and curve code) in the server's main thread, 12.9 MB of heap that
 * stays live for the life of the process for these two entries. Every live megabyte also costs
 * each full GC its marking time and raises the heap size the next one is allowed to reach.
 */
export const tip20TransferAbi = [
  {
    name: 'transfer',
    type: 'function',
    stateMutability: 'nonpayable',
    inputs: [
      { type: 'address', name: 'to' },
      { type: 'uint256', name: 'amount' },
    ],
    outputs: [{ type: 'bool' }],
  },
  {
    name: 'transferWithMemo',
    type: 'function',
    stateMutability: 'nonpayable',
    inputs: [
      { type: 'address', name: 'to' },
      { type: 'uint256', name: 'amount' },
      { type: 'bytes32', name: 'memo' },
    ],
    outputs: [],
  },
] as const;
