import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { authenticateApiKey } from '../../src/app/accounts/apiKeys.js';
import {
  authenticateAdmin,
  bearerToken,
  generateAdminToken,
  generateApiKey,
  hashSecret,
  validateAdminToken,
} from '../../src/app/accounts/auth/credentials.js';
import { DomainError } from '../../src/domain/errors.js';
import { openStore, type Store } from '../../src/store/store.js';
import { testDeps } from '../helpers/testDeps.js';

/** Runs `fn`, which must throw an `unauthenticated` DomainError, and returns its message. */
function unauthenticated(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).kind).toBe('unauthenticated');
    expect((err as DomainError).code).toBe('unauthenticated');
    return (err as DomainError).shortMessage;
  }
  throw new Error('expected an unauthenticated DomainError');
}

/** The same for an async call (a lookup through the store interface): awaits its refusal. */
async function unauthenticatedAsync(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (err) {
    return unauthenticated(() => {
      throw err;
    });
  }
  throw new Error('expected an unauthenticated DomainError');
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();

describe('hashSecret', () => {
  test('behavior: SHA-256 of the UTF-8 text', () => {
    expect(hashSecret('abc').toString('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});

describe('generateApiKey', () => {
  test('behavior: ak_<mode>_ plus 48 hex digits; 16-character prefix; hash of the plaintext', () => {
    for (const mode of ['live', 'test'] as const) {
      const k = generateApiKey(mode);
      expect(k.plaintext).toMatch(new RegExp(`^ak_${mode}_[0-9a-f]{48}$`));
      expect(k.prefix).toBe(k.plaintext.slice(0, 16));
      expect(k.prefix.startsWith(`ak_${mode}_`)).toBe(true);
      expect(k.hash.equals(sha256(k.plaintext))).toBe(true);
    }
  });

  test('behavior: keys are unique', () => {
    const keys = new Set(Array.from({ length: 100 }, () => generateApiKey('test').plaintext));
    expect(keys.size).toBe(100);
  });
});

describe('generateAdminToken', () => {
  test('behavior: ppadm_ plus 48 hex digits, unique, and valid as an operator token', () => {
    const a = generateAdminToken();
    expect(a).toMatch(/^ppadm_[0-9a-f]{48}$/);
    expect(generateAdminToken()).not.toBe(a);
    expect(validateAdminToken(a)).toBeUndefined();
  });
});

describe('validateAdminToken', () => {
  test('behavior: 24+ printable ASCII characters are accepted', () => {
    expect(validateAdminToken('x'.repeat(24))).toBeUndefined();
    expect(validateAdminToken('!~'.repeat(40))).toBeUndefined();
  });

  test('error: too short, spaces, control or non-ASCII characters', () => {
    expect(validateAdminToken('x'.repeat(23))).toBe('must be at least 24 characters');
    expect(validateAdminToken('')).toBe('must be at least 24 characters');
    expect(validateAdminToken(`${'x'.repeat(24)} y`)).toBe('must be printable ASCII without spaces');
    expect(validateAdminToken(`${'x'.repeat(24)}\t`)).toBe('must be printable ASCII without spaces');
    expect(validateAdminToken(`${'x'.repeat(24)}é`)).toBe('must be printable ASCII without spaces');
  });
});

describe('bearerToken', () => {
  test('behavior: extracts the token, scheme case-insensitive, surrounding spaces tolerated', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer abc')).toBe('abc');
    expect(bearerToken('BEARER   abc  ')).toBe('abc');
  });

  test('error: unauthenticated: missing header', () => {
    for (const h of [undefined, null, '']) expect(unauthenticated(() => bearerToken(h))).toBe('Missing Authorization header');
  });

  test('error: unauthenticated: malformed header', () => {
    for (const h of ['abc', 'Bearer', 'Bearer ', 'Basic abc', 'Bearer a b', 'Bearerabc', ' Bearer abc', 'Token abc']) {
      expect(unauthenticated(() => bearerToken(h)), h).toMatch(/^Malformed Authorization header/);
    }
  });
});

describe('authenticateAdmin', () => {
  const token = generateAdminToken();
  const expected = hashSecret(token);

  test('behavior: the right token passes', () => {
    expect(() => authenticateAdmin(expected, `Bearer ${token}`)).not.toThrow();
  });

  test('error: unauthenticated: wrong tokens of any length, never a RangeError from timingSafeEqual', () => {
    // Hashing first gives timingSafeEqual equal-length inputs, so length never short-circuits.
    for (const wrong of ['x', token.slice(0, -1), `${token}0`, token.toUpperCase(), 'y'.repeat(10_000), generateApiKey('test').plaintext]) {
      expect(unauthenticated(() => authenticateAdmin(expected, `Bearer ${wrong}`))).toBe('Invalid admin token');
    }
  });

  test('error: unauthenticated: missing or malformed header', () => {
    expect(unauthenticated(() => authenticateAdmin(expected, undefined))).toBe('Missing Authorization header');
    expect(unauthenticated(() => authenticateAdmin(expected, token))).toMatch(/^Malformed/);
  });
});

describe('authenticateApiKey', () => {
  // A fresh database file: the store tier of the test pyramid.
  let dir: string;
  let store: Store;
  const orgId = 'org_0123456789abcdef01234567';
  const live = generateApiKey('live');
  const revoked = generateApiKey('test');
  const keyDeps = () => testDeps(store);

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'paypolicy-credentials-'));
    store = openStore(join(dir, 'paypolicy.db'));
    store.organizations.insert({ id: orgId, name: 'o', approvalWindowSeconds: 3600, createdAt: 1 });
    store.apiKeys.insert({ id: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', orgId, mode: 'live', prefix: live.prefix, label: '', createdAt: 1, revokedAt: null }, live.hash);
    store.apiKeys.insert({ id: 'key_bbbbbbbbbbbbbbbbbbbbbbbb', orgId, mode: 'test', prefix: revoked.prefix, label: '', createdAt: 1, revokedAt: null }, revoked.hash);
    store.apiKeys.revoke('key_bbbbbbbbbbbbbbbbbbbbbbbb', 2);
  });
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('behavior: a stored key resolves to its organization, key id and mode', async () => {
    expect(await authenticateApiKey(keyDeps(), `Bearer ${live.plaintext}`)).toEqual({ kind: 'api_key', orgId, keyId: 'key_aaaaaaaaaaaaaaaaaaaaaaaa', mode: 'live' });
  });

  test('error: unauthenticated: unknown and revoked keys get the same answer', async () => {
    expect(await unauthenticatedAsync(() => authenticateApiKey(keyDeps(), `Bearer ${revoked.plaintext}`))).toBe('Invalid or revoked API key');
    expect(await unauthenticatedAsync(() => authenticateApiKey(keyDeps(), `Bearer ${generateApiKey('live').plaintext}`))).toBe('Invalid or revoked API key');
  });

  test('error: unauthenticated: a token that is not API-key shaped is refused before lookup', async () => {
    for (const t of [generateAdminToken(), 'ak_prod_' + 'a'.repeat(48), live.plaintext.toUpperCase(), live.plaintext.slice(0, -1)]) {
      expect(await unauthenticatedAsync(() => authenticateApiKey(keyDeps(), `Bearer ${t}`))).toBe('Malformed API key');
    }
  });
});
