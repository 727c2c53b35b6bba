import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { open, seal } from '../../src/signing/secretBox.js';

const key = randomBytes(32);
const plaintext = randomBytes(32);
const aad = 'org_0123456789abcdef01234567';

describe('seal', () => {
  test('behavior: version 1 | 12-byte iv | 16-byte tag | ciphertext of the same length', () => {
    const blob = seal(key, plaintext, aad);
    expect(blob.length).toBe(1 + 12 + 16 + plaintext.length);
    expect(blob[0]).toBe(1);
    expect(blob.subarray(29).equals(plaintext)).toBe(false);
  });

  test('behavior: a random IV makes two seals of the same plaintext differ', () => {
    const a = seal(key, plaintext, aad);
    const b = seal(key, plaintext, aad);
    expect(a.equals(b)).toBe(false);
    expect(a.subarray(1, 13).equals(b.subarray(1, 13))).toBe(false);
  });
});

describe('open', () => {
  test('behavior: round trip, including an empty plaintext', () => {
    expect(open(key, seal(key, plaintext, aad), aad).equals(plaintext)).toBe(true);
    expect(open(key, seal(key, Buffer.alloc(0), aad), aad).length).toBe(0);
  });

  test('error: a different aad (another organization) fails authentication', () => {
    const blob = seal(key, plaintext, aad);
    expect(() => open(key, blob, 'org_other000000000000000000')).toThrow(/unable to authenticate/);
    expect(() => open(key, blob, '')).toThrow(/unable to authenticate/);
  });

  test('error: a different key fails authentication', () => {
    const blob = seal(key, plaintext, aad);
    expect(() => open(randomBytes(32), blob, aad)).toThrow(/unable to authenticate/);
  });

  test('error: flipping any single byte after the version fails authentication', () => {
    const blob = seal(key, plaintext, aad);
    for (let i = 1; i < blob.length; i++) {
      const tampered = Buffer.from(blob);
      tampered[i]! ^= 0x01;
      expect(() => open(key, tampered, aad), `byte ${i}`).toThrow();
    }
  });

  test('error: a truncated blob or an unknown version is refused before decryption', () => {
    const blob = seal(key, plaintext, aad);
    expect(() => open(key, blob.subarray(0, 28), aad)).toThrow('sealed blob has an unknown format');
    const v2 = Buffer.from(blob);
    v2[0] = 2;
    expect(() => open(key, v2, aad)).toThrow('sealed blob has an unknown format');
    // Dropping ciphertext bytes keeps the header valid but fails the tag.
    expect(() => open(key, blob.subarray(0, blob.length - 1), aad)).toThrow(/unable to authenticate/);
  });
});
