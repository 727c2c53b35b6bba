import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import {
  bytesToHex,
  hashTypedData,
  parseTransaction,
  recoverAddress,
  recoverTransactionAddress,
  recoverTypedDataAddress,
  encodeFunctionData,
  erc20Abi,
  type Hex,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { loadSigningKey, runSignJob, signDigest } from '../../src/signing/signJob.js';
import { DOMAIN_SEPARATORS_KEPT, EIP3009_TYPES, PERMIT2_WITNESS_TYPES, domainSeparatorsKept, eip3009Digest, permit2Digest, permit2Domain } from '../../src/signing/typedData.js';
import { PERMIT2_ADDRESS, USDC, X402_EXACT_PERMIT2_PROXY } from '../../src/signing/tokens.js';

const randomAddress = () => bytesToHex(randomBytes(20)) as Hex;

describe('eip3009Digest', () => {
  test('behavior: equals viem hashTypedData for random messages on both USDC domains', () => {
    for (const token of [USDC[8453]!, USDC[84532]!]) {
      for (let i = 0; i < 50; i++) {
        const domain = { name: token.name, version: token.version, chainId: token.chainId, verifyingContract: token.address };
        const message = {
          from: randomAddress(), to: randomAddress(),
          value: BigInt(`0x${randomBytes(i % 32 + 1).toString('hex')}`),
          validAfter: BigInt(Math.floor(Math.random() * 2 ** 40)), validBefore: BigInt(2 ** 40 + i),
          nonce: bytesToHex(randomBytes(32)),
        };
        const expected = hashTypedData({ domain, types: EIP3009_TYPES, primaryType: 'TransferWithAuthorization', message });
        expect(bytesToHex(eip3009Digest(domain, message))).toBe(expected);
      }
    }
  });

  test('behavior: the remembered domain separators stay bounded however many domains paywalls name, and digests stay exact', () => {
    const t = USDC[84532]!;
    const message = { from: randomAddress(), to: randomAddress(), value: 1n, validAfter: 0n, validBefore: 1n, nonce: bytesToHex(randomBytes(32)) };
    for (let i = 0; i < 4 * DOMAIN_SEPARATORS_KEPT; i++) {
      const domain = { name: `${'n'.repeat(4000)}${i}`, version: '2', chainId: t.chainId, verifyingContract: t.address };
      const digest = eip3009Digest(domain, message);
      if (i % 97 === 0) expect(bytesToHex(digest)).toBe(hashTypedData({ domain, types: EIP3009_TYPES, primaryType: 'TransferWithAuthorization', message }));
    }
    expect(domainSeparatorsKept()).toBe(DOMAIN_SEPARATORS_KEPT);
    // An evicted domain is computed again, exactly.
    const first = { name: `${'n'.repeat(4000)}0`, version: '2', chainId: t.chainId, verifyingContract: t.address };
    expect(bytesToHex(eip3009Digest(first, message))).toBe(hashTypedData({ domain: first, types: EIP3009_TYPES, primaryType: 'TransferWithAuthorization', message }));
    expect(domainSeparatorsKept()).toBe(DOMAIN_SEPARATORS_KEPT);
  });

  test('error: out-of-range values are refused, not truncated', () => {
    const t = USDC[8453]!;
    const domain = { name: t.name, version: t.version, chainId: t.chainId, verifyingContract: t.address };
    const base = { from: randomAddress(), to: randomAddress(), value: 1n, validAfter: 0n, validBefore: 1n, nonce: bytesToHex(randomBytes(32)) };
    expect(() => eip3009Digest(domain, { ...base, value: -1n })).toThrow(RangeError);
    expect(() => eip3009Digest(domain, { ...base, value: 1n << 256n })).toThrow(RangeError);
    expect(() => eip3009Digest(domain, { ...base, nonce: '0x01' })).toThrow(RangeError);
  });
});

describe('runSignJob', () => {
  const privateKey = generatePrivateKey();
  const account = privateKeyToAccount(privateKey);
  const key = loadSigningKey(privateKey);

  test('behavior: eip3009 signature recovers to the treasury and equals viem signTypedData', async () => {
    const t = USDC[8453]!;
    const domain = { name: t.name, version: t.version, chainId: t.chainId, verifyingContract: t.address };
    const message = { from: account.address, to: randomAddress(), value: 1_500_000n, validAfter: 0n, validBefore: 1_900_000_000n, nonce: bytesToHex(randomBytes(32)) };
    const { signature } = runSignJob(key, { kind: 'eip3009', orgId: 'org', domain, message });
    const recovered = await recoverTypedDataAddress({ domain, types: EIP3009_TYPES, primaryType: 'TransferWithAuthorization', message, signature });
    expect(recovered).toBe(account.address);
    // libsecp256k1 and viem both use RFC 6979 nonces and low-s, so the bytes match exactly.
    expect(signature).toBe(await account.signTypedData({ domain, types: EIP3009_TYPES, primaryType: 'TransferWithAuthorization', message }));
  });

  test('behavior: permit2 witness signature recovers to the treasury', async () => {
    const message = {
      permitted: { token: USDC[8453]!.address, amount: 42n }, spender: X402_EXACT_PERMIT2_PROXY,
      nonce: 7n, deadline: 1_900_000_000n, witness: { to: randomAddress(), validAfter: 0n },
    };
    const { signature } = runSignJob(key, { kind: 'permit2', orgId: 'org', chainId: 8453, permit2: PERMIT2_ADDRESS, message });
    const recovered = await recoverTypedDataAddress({
      domain: permit2Domain(8453, PERMIT2_ADDRESS), types: PERMIT2_WITNESS_TYPES, primaryType: 'PermitWitnessTransferFrom', message, signature,
    });
    expect(recovered).toBe(account.address);
    expect(bytesToHex(permit2Digest(8453, PERMIT2_ADDRESS, message))).toBe(
      hashTypedData({ domain: permit2Domain(8453, PERMIT2_ADDRESS), types: PERMIT2_WITNESS_TYPES, primaryType: 'PermitWitnessTransferFrom', message }),
    );
  });

  test('behavior: eip1559 transaction is well-formed, signed by the treasury, hash matches', async () => {
    const to = randomAddress();
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, 5_000_000n] });
    const out = runSignJob(key, {
      kind: 'eip1559', orgId: 'org',
      tx: { chainId: 8453, nonce: 3, to: USDC[8453]!.address, data, gas: 100_000n, maxFeePerGas: 10n ** 8n, maxPriorityFeePerGas: 10n ** 6n },
    });
    const parsed = parseTransaction(out.serialized!);
    expect(parsed.chainId).toBe(8453);
    expect(parsed.nonce).toBe(3);
    expect(parsed.data).toBe(data);
    expect(await recoverTransactionAddress({ serializedTransaction: out.serialized! as `0x02${string}` })).toBe(account.address);
  });

  test('error: a key whose public key (and address) does not match fails the self-check', () => {
    const other = loadSigningKey(generatePrivateKey());
    const tampered = { secret: key.secret, publicKey: other.publicKey, address: other.address };
    expect(() => signDigest(tampered, randomBytes(32))).toThrow('self-check');
    // The check compares the recovered public key itself: a wrong one fails even beside the right address.
    expect(() => signDigest({ ...key, publicKey: other.publicKey }, randomBytes(32))).toThrow('self-check');
  });

  test('behavior: signDigest output recovers with viem recoverAddress', async () => {
    const digest = randomBytes(32);
    const sig = signDigest(key, digest);
    const full = `${sig.r}${sig.s.slice(2)}${(27 + sig.recid).toString(16)}` as Hex;
    expect(await recoverAddress({ hash: bytesToHex(digest), signature: full })).toBe(account.address);
  });
});
