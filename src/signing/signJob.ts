import secp256k1 from 'secp256k1';
import { bytesToHex, hexToBytes, keccak256, serializeTransaction, type Hex } from 'viem';
import type { SignJob, SignOutput } from './signJobs.js';
import { serializeSignedTempoTransaction, tempoSigningHash } from './tempoTransaction.js';
import { eip3009Digest, permit2Digest } from './typedData.js';

/**
 * A loaded signing key with the public key (and address) it must produce, so every signature is
 * self-checked.
 */
export type SigningKey = { secret: Uint8Array; publicKey: Buffer; address: Uint8Array };

/** Derives the uncompressed public key and the 20-byte Ethereum address of a secp256k1 private key. */
export function loadSigningKey(privateKey: Hex): SigningKey {
  const secret = hexToBytes(privateKey);
  if (secret.length !== 32 || !secp256k1.privateKeyVerify(secret)) throw new Error('invalid private key');
  const pub = secp256k1.publicKeyCreate(secret, false);
  return { secret, publicKey: Buffer.from(pub), address: keccak256(pub.subarray(1), 'bytes').subarray(12) };
}

/**
 * Signs a 32-byte digest with libsecp256k1 (RFC 6979 nonces, low-s) and recovers the signer
 * before returning: a signature that does not recover to the treasury never leaves this function.
 * The recovered public key is compared with the treasury's own, which is what the address stands
 * for (the address is its hash): the same check without a keccak in JavaScript per signature.
 */
export function signDigest(key: SigningKey, digest: Uint8Array): { r: Hex; s: Hex; recid: number; bytes: Uint8Array } {
  const { signature, recid } = secp256k1.ecdsaSign(digest, key.secret);
  const recovered = secp256k1.ecdsaRecover(signature, recid, digest, false);
  if (!key.publicKey.equals(recovered)) throw new Error('signature self-check failed');
  return { r: bytesToHex(signature.subarray(0, 32)), s: bytesToHex(signature.subarray(32)), recid, bytes: signature };
}

function rsv(sig: { bytes: Uint8Array; recid: number }): Hex {
  const out = new Uint8Array(65);
  out.set(sig.bytes, 0);
  out[64] = 27 + sig.recid;
  return bytesToHex(out);
}

/** Runs one job with its organization's key. Pure CPU; used inside the signing threads. */
export function runSignJob(key: SigningKey, job: SignJob): SignOutput {
  switch (job.kind) {
    case 'eip3009':
      return { signature: rsv(signDigest(key, eip3009Digest(job.domain, job.message))) };
    case 'permit2':
      return { signature: rsv(signDigest(key, permit2Digest(job.chainId, job.permit2, job.message))) };
    case 'eip1559': {
      const tx = { type: 'eip1559' as const, value: 0n, ...job.tx };
      const sig = signDigest(key, keccak256(hexToBytes(serializeTransaction(tx)), 'bytes'));
      const serialized = serializeTransaction(tx, { r: sig.r, s: sig.s, yParity: sig.recid });
      return { signature: rsv(sig), serialized, hash: keccak256(serialized) };
    }
    case 'tempo': {
      const signature = rsv(signDigest(key, tempoSigningHash(job.tx)));
      const serialized = serializeSignedTempoTransaction(job.tx, signature, bytesToHex(key.address));
      return { signature, serialized, hash: keccak256(serialized) };
    }
  }
}
