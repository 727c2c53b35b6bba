import { describe, expect, test } from 'vitest';
import { hashPassword, validateNewPassword, verifyPassword } from '../../src/app/accounts/dashboardPasswords.js';
import { DomainError } from '../../src/domain/errors.js';

describe('hashPassword', () => {
  test('behavior: scrypt with a fresh 16-byte salt per hash and its parameters stored beside it', async () => {
    const a = await hashPassword('correct horse battery');
    const b = await hashPassword('correct horse battery');
    expect(a.params).toBe('scrypt:32768:8:1');
    expect(a.salt).toHaveLength(16);
    expect(a.hash).toHaveLength(32);
    expect(a.salt.equals(b.salt)).toBe(false);
    expect(a.hash.equals(b.hash)).toBe(false);
    expect(a.hash.toString('utf8')).not.toContain('correct horse');
  });
});

describe('verifyPassword', () => {
  test('behavior: true for the password, false for any other', async () => {
    const record = await hashPassword('correct horse battery');
    expect(await verifyPassword('correct horse battery', record)).toBe(true);
    expect(await verifyPassword('correct horse batterY', record)).toBe(false);
    expect(await verifyPassword('', record)).toBe(false);
  });

  test('behavior: composed and decomposed forms of the same text are the same password (NFC)', async () => {
    const record = await hashPassword('caf\u00e9 au lait, bitte');
    expect(await verifyPassword('cafe\u0301 au lait, bitte', record)).toBe(true);
  });

  test('behavior: no record (unknown email) is false after the same work as a real check', async () => {
    const record = await hashPassword('correct horse battery');
    const t0 = performance.now();
    expect(await verifyPassword('correct horse battery', record)).toBe(true);
    const known = performance.now() - t0;
    const t1 = performance.now();
    expect(await verifyPassword('correct horse battery', undefined)).toBe(false);
    const unknown = performance.now() - t1;
    // Same scrypt parameters: within a factor of a few, never an order of magnitude faster.
    expect(unknown).toBeGreaterThan(known / 4);
  });

  test('behavior: an absurdly long input is refused without hashing all of it', async () => {
    const record = await hashPassword('correct horse battery');
    expect(await verifyPassword('x'.repeat(100_000), record)).toBe(false);
  });
});

describe('validateNewPassword', () => {
  test('error: invalid_argument below 12 characters, counted as characters not bytes', () => {
    expect(() => validateNewPassword('elevenchars')).toThrow(DomainError);
    expect(() => validateNewPassword('elevenchars')).toThrow(/at least 12 characters/);
    expect(validateNewPassword('twelve chars')).toBe('twelve chars');
    // 11 emoji are 22 UTF-16 units but 11 characters.
    expect(() => validateNewPassword('🔑'.repeat(11))).toThrow(/at least 12/);
    expect(() => validateNewPassword('x'.repeat(1025))).toThrow(/at most 1024/);
  });
});
