import { randomBytes, scryptSync } from 'node:crypto';
import { threadId } from 'node:worker_threads';
import { afterAll, describe, expect, test, vi } from 'vitest';
import {
  hashForAccount, hashForSignIn, MAX_ACCOUNT_HASHES_PER_ORG, PASSWORD_THREAD_IDLE_MS, PasswordHasherBusyError, passwordHasherState, setPasswordThreadIdleMs,
} from '../../src/app/accounts/auth/passwordHasher.js';

/**
 * The password-hashing thread stops when idle and starts again on the next hash (real worker
 * threads, real scrypt; small parameters keep each hash a few milliseconds). The sign-in flood
 * and the libuv-pool guarantees are in test/adversarial/signin-flood.test.ts.
 */
const PARAMS = { N: 1024, r: 8, p: 1 };

function expected(password: string, salt: Buffer): Buffer {
  return scryptSync(password, salt, 32, { ...PARAMS, maxmem: 256 * PARAMS.N * PARAMS.r });
}

afterAll(() => setPasswordThreadIdleMs(PASSWORD_THREAD_IDLE_MS));

describe('passwordHasher', () => {
  test('behavior: an idle hashing thread stops; the next hash starts a new thread and gives the same key', async () => {
    setPasswordThreadIdleMs(100);
    const salt = randomBytes(16);
    expect(await hashForAccount('a password', salt, PARAMS, 32)).toEqual(expected('a password', salt));
    const first = passwordHasherState().lastThreadId;
    expect(first).not.toBe(threadId);
    await vi.waitFor(() => expect(passwordHasherState().threadRunning).toBe(false));
    expect(await hashForSignIn('a password', salt, PARAMS, 32)).toEqual(expected('a password', salt));
    const second = passwordHasherState().lastThreadId;
    expect(second).not.toBe(first);
    expect(second).not.toBe(threadId);
    expect(passwordHasherState().threadRunning).toBe(true);
  });

  test('behavior: a thread with jobs queued or running is never stopped, even with an idle period of 1 ms', async () => {
    setPasswordThreadIdleMs(1);
    const jobs = Array.from({ length: 6 }, (_, i) => {
      const salt = randomBytes(16);
      const hash = i % 2 === 0 ? hashForSignIn : hashForAccount;
      return hash(`password ${i}`, salt, PARAMS, 32).then((key) => expect(key).toEqual(expected(`password ${i}`, salt)));
    });
    await Promise.all(jobs);
    expect(passwordHasherState().waitingSignIns).toBe(0);
    await vi.waitFor(() => expect(passwordHasherState().threadRunning).toBe(false));
  });

  test('error: a hash that fails on a newly started thread rejects (nothing is answered from it), and the thread keeps serving', async () => {
    setPasswordThreadIdleMs(100);
    await vi.waitFor(() => expect(passwordHasherState().threadRunning).toBe(false));
    // N must be a power of two: scrypt refuses on the thread.
    await expect(hashForSignIn('a password', randomBytes(16), { N: 1000, r: 8, p: 1 }, 32)).rejects.toThrow(/^password hashing failed: /);
    expect(passwordHasherState().waitingSignIns).toBe(0);
    const salt = randomBytes(16);
    expect(await hashForSignIn('a password', salt, PARAMS, 32)).toEqual(expected('a password', salt));
  });

  test('behavior: one organization has at most its share of account hashes in the line; another organization and the operator still hash', async () => {
    const salt = randomBytes(16);
    const mine = Array.from({ length: MAX_ACCOUNT_HASHES_PER_ORG }, (_, i) => hashForAccount(`owner ${i}`, salt, PARAMS, 32, 'org-a'));
    // Queued synchronously: the next one of org-a is refused before the first has run.
    await expect(hashForAccount('owner again', salt, PARAMS, 32, 'org-a')).rejects.toBeInstanceOf(PasswordHasherBusyError);
    const others = [hashForAccount('other org', salt, PARAMS, 32, 'org-b'), hashForAccount('operator', salt, PARAMS, 32), hashForSignIn('sign-in', salt, PARAMS, 32)];
    expect(await Promise.all(others)).toEqual([expected('other org', salt), expected('operator', salt), expected('sign-in', salt)]);
    expect(await Promise.all(mine)).toEqual(mine.map((_, i) => expected(`owner ${i}`, salt)));
    // Its hashes done, org-a has its share back.
    expect(await hashForAccount('owner later', salt, PARAMS, 32, 'org-a')).toEqual(expected('owner later', salt));
  });
});
