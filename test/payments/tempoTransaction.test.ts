import { randomBytes } from 'node:crypto';
import { bytesToHex, encodeFunctionData, getAddress, keccak256, maxUint256, recoverAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { tempo, tempoModerato } from 'viem/chains';
import { Abis, Transaction } from 'viem/tempo';
import { describe, expect, test } from 'vitest';
import { createSignerPool } from '../../src/signing/signerPool.js';
import { loadSigningKey, runSignJob } from '../../src/signing/signJob.js';
import type { TempoFields } from '../../src/signing/signJobs.js';
import { serializeSignedTempoTransaction, tempoSigningHash } from '../../src/signing/tempoTransaction.js';

/**
 * The hand-written Tempo encoder against viem 2.57.13's own Tempo serializer: the signing hash is
 * what viem's local-account `signTransaction` hashes (keccak256 of the serializer's unsigned
 * output), and the signed envelope is byte-identical to `privateKeyToAccount(pk).signTransaction`.
 */

const randomAddress = (): Address => bytesToHex(randomBytes(20));
const PATH_USD: Address = '0x20c0000000000000000000000000000000000000';

function transferWithMemo(to: Address, amount: bigint): Hex {
  return encodeFunctionData({ abi: Abis.tip20, functionName: 'transferWithMemo', args: [to, amount, bytesToHex(randomBytes(32))] });
}

function randomFields(i: number, sponsored: boolean): TempoFields {
  const calls = Array.from({ length: 1 + (i % 3) }, () => ({ to: PATH_USD, data: transferWithMemo(randomAddress(), BigInt(1 + i * 997)) }));
  return {
    chainId: i % 2 === 0 ? tempoModerato.id : tempo.id,
    calls,
    nonceKey: maxUint256,
    nonce: 0n,
    validBefore: 1_800_000_000 + i,
    gas: BigInt(21_000 + i * 1000),
    // Zero prices exercise the empty-for-zero rule.
    maxFeePerGas: i % 5 === 0 ? 0n : BigInt(20_000_000_000 + i),
    maxPriorityFeePerGas: i % 4 === 0 ? 0n : BigInt(i),
    ...(sponsored ? {} : { feeToken: PATH_USD }),
    sponsored,
  };
}

/** The same transaction as viem's Tempo serializer takes it. */
function viemTransaction(tx: TempoFields) {
  return {
    type: 'tempo' as const,
    chainId: tx.chainId,
    calls: tx.calls,
    nonceKey: tx.nonceKey,
    nonce: Number(tx.nonce),
    validBefore: tx.validBefore,
    gas: tx.gas,
    maxFeePerGas: tx.maxFeePerGas,
    maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
    ...(tx.feeToken === undefined ? {} : { feeToken: tx.feeToken }),
    ...(tx.sponsored ? { feePayer: true as const } : {}),
  };
}

const serializer = tempoModerato.serializers!.transaction! as (tx: unknown, sig?: unknown) => Promise<Hex>;

describe('tempoSigningHash', () => {
  for (const sponsored of [false, true]) {
    test(`behavior: equals keccak256 of viem's unsigned serialization (${sponsored ? 'sponsored' : 'fee token'})`, async () => {
      for (let i = 0; i < 25; i++) {
        const tx = randomFields(i, sponsored);
        const unsigned = await serializer(viemTransaction(tx));
        expect(unsigned.slice(0, 4)).toBe('0x76');
        expect(bytesToHex(tempoSigningHash(tx))).toBe(keccak256(unsigned));
      }
    });
  }

  test('error: zero chain id, empty calls and a sponsored fee token are refused', () => {
    const tx = randomFields(1, false);
    expect(() => tempoSigningHash({ ...tx, chainId: 0 })).toThrow(RangeError);
    expect(() => tempoSigningHash({ ...tx, calls: [] })).toThrow(RangeError);
    expect(() => tempoSigningHash({ ...tx, sponsored: true })).toThrow(RangeError);
    expect(() => tempoSigningHash({ ...tx, nonceKey: 1n << 256n })).toThrow(RangeError);
  });
});

describe('runSignJob (tempo)', () => {
  for (const sponsored of [false, true]) {
    test(`behavior: byte-identical to privateKeyToAccount().signTransaction (${sponsored ? 'sponsored, 0x78' : 'fee token, 0x76'})`, async () => {
      for (let i = 0; i < 10; i++) {
        const pk = generatePrivateKey();
        const account = privateKeyToAccount(pk);
        const tx = randomFields(i, sponsored);
        const out = runSignJob(loadSigningKey(pk), { kind: 'tempo', orgId: 'org', tx });
        const expected = await account.signTransaction(viemTransaction(tx) as never, { serializer: serializer as never });
        expect(out.serialized).toBe(expected);
        expect(out.hash).toBe(keccak256(expected));
        // viem itself puts the sponsored hand-off in a 0x78 envelope, not 0x76.
        expect(expected.slice(0, 4)).toBe(sponsored ? '0x78' : '0x76');
        expect(await recoverAddress({ hash: bytesToHex(tempoSigningHash(tx)), signature: out.signature })).toBe(account.address);

        const parsed = Transaction.deserialize(out.serialized!) as Record<string, unknown>;
        expect(parsed).toMatchObject({ chainId: tx.chainId, nonceKey: maxUint256, validBefore: tx.validBefore, gas: tx.gas });
        expect(getAddress(parsed.from as Address)).toBe(account.address);
        expect((parsed.calls as unknown[]).length).toBe(tx.calls.length);
        if (sponsored) expect(parsed.feeToken).toBeUndefined();
        else expect(String(parsed.feeToken).toLowerCase()).toBe(PATH_USD);
      }
    });
  }

  test('error: a signature that is not 65 bytes is refused by the serializer', () => {
    expect(() => serializeSignedTempoTransaction(randomFields(2, false), '0x1234', randomAddress())).toThrow(RangeError);
  });
});

describe('createSignerPool (tempo)', () => {
  test('behavior: a tempo job crosses the worker boundary and signs the same bytes as in process', async () => {
    const pk = generatePrivateKey();
    const pool = createSignerPool(1, () => pk);
    try {
      for (const sponsored of [false, true]) {
        const tx = randomFields(3, sponsored);
        const out = await pool.sign({ kind: 'tempo', orgId: 'org', tx });
        expect(out).toEqual(runSignJob(loadSigningKey(pk), { kind: 'tempo', orgId: 'org', tx }));
      }
    } finally {
      await pool.close();
    }
  });
});
