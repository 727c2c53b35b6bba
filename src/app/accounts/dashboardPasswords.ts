import { randomBytes, timingSafeEqual } from 'node:crypto';
import { overloaded } from '../../overload/admission.js';
import { hashForAccount, hashForSignIn, PasswordHasherBusyError, type ScryptParams } from './auth/passwordHasher.js';
import { invalidArgument } from '../../domain/errors.js';
import type { PasswordRecord } from '../../store/port.js';

/** Shortest password accepted; people choose these, so length is what buys resistance. */
export const MIN_PASSWORD_LENGTH = 12;
/** Longest password accepted; bounds the work a single sign-in attempt can ask for. */
export const MAX_PASSWORD_LENGTH = 1024;

// N = 2^15, r = 8: 32 MiB and roughly 50–100 ms per hash on one core. The parameters are stored
// with each hash so they can be raised later without invalidating existing passwords.
const CURRENT = { N: 32768, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;

function paramsText(p: ScryptParams): string {
  return `scrypt:${p.N}:${p.r}:${p.p}`;
}

function parseParams(text: string): ScryptParams {
  const m = /^scrypt:(\d+):(\d+):(\d+)$/.exec(text);
  if (!m) throw new Error(`unknown password hash parameters ${text.slice(0, 40)}`);
  return { N: Number(m[1]), r: Number(m[2]), p: Number(m[3]) };
}

// scrypt runs on the password-hashing thread (src/app/accounts/auth/passwordHasher.ts), never on libuv's pool,
// which the WAL sync needs; sign-ins go through its bounded queue. NFC so that the same password
// typed on different systems hashes the same.
function derive(password: string, salt: Buffer, p: ScryptParams, purpose: 'sign-in' | 'account', orgId?: string): Promise<Buffer> {
  const text = password.normalize('NFC');
  return purpose === 'sign-in' ? hashForSignIn(text, salt, p, KEY_LENGTH) : hashForAccount(text, salt, p, KEY_LENGTH, orgId);
}

/** Checks a new password's length; the message is safe to show next to the field. */
export function validateNewPassword(password: string): string {
  const length = [...password].length;
  if (length < MIN_PASSWORD_LENGTH) throw invalidArgument(`password must be at least ${MIN_PASSWORD_LENGTH} characters`, 'weak_password');
  if (length > MAX_PASSWORD_LENGTH) throw invalidArgument(`password must be at most ${MAX_PASSWORD_LENGTH} characters`);
  return password;
}

/**
 * Salted scrypt hash of a password with a fresh per-user salt, on the password-hashing thread.
 * Asked for an organization's owner (`orgId`), refused `overloaded` while that organization already
 * has its share of the hashing line (passwordHasher.ts MAX_ACCOUNT_HASHES_PER_ORG).
 */
export async function hashPassword(password: string, orgId?: string): Promise<PasswordRecord> {
  const salt = randomBytes(SALT_LENGTH);
  try {
    return { salt, hash: await derive(password, salt, CURRENT, 'account', orgId), params: paramsText(CURRENT) };
  } catch (err) {
    if (err instanceof PasswordHasherBusyError) throw overloaded('password changes in flight for this organization');
    throw err;
  }
}

// Used when the email is unknown, so an unknown address costs the same time as a wrong password.
const DUMMY: PasswordRecord = { salt: Buffer.alloc(SALT_LENGTH), hash: Buffer.alloc(KEY_LENGTH), params: paramsText(CURRENT) };

/**
 * Compares a password with a stored record in constant time. With no record it still does the
 * full scrypt work, through the same bounded queue, and answers false, so timing does not tell
 * unknown emails from wrong passwords. Rejects with PasswordHasherBusyError when the sign-in
 * queue is full (for known and unknown emails alike).
 */
export async function verifyPassword(password: string, record: PasswordRecord | undefined): Promise<boolean> {
  const r = record ?? DUMMY;
  // No stored password is longer than MAX_PASSWORD_LENGTH, so a longer input is wrong either way;
  // cutting it keeps the work per attempt bounded without changing any answer.
  const tooLong = [...password].length > MAX_PASSWORD_LENGTH;
  const candidate = await derive(tooLong ? '' : password, r.salt, parseParams(r.params), 'sign-in');
  const same = candidate.length === r.hash.length && timingSafeEqual(candidate, r.hash);
  return record !== undefined && !tooLong && same;
}
