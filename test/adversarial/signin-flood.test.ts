import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, constants, mkdtempSync, openSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMainThread, threadId } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { AdminService } from '../../gen/paypolicy/v1/admin_pb.js';
import {
  LOCKOUT_MS, LOGIN_FAILURE_PRUNE_MS, MAX_FAILED_SIGN_INS_PER_ADDRESS, signIn, signInAddressKey,
} from '../../src/app/accounts/dashboardSessions.js';
import { hashForAccount, MAX_WAITING_SIGN_INS, passwordHasherState } from '../../src/app/accounts/auth/passwordHasher.js';
import { DomainError } from '../../src/domain/errors.js';
import { connectClient } from '../helpers/clients.js';
import { bearer } from '../helpers/rpc.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createUser, signInForm } from '../dashboard/helpers.js';

/**
 * Unauthenticated sign-in floods against the real server: scrypt never runs on
 * libuv's thread pool (which the WAL sync needs), sign-ins beyond the hashing queue's bound are
 * answered 429 at once, failures are limited per client address as well as per email, and old
 * failure rows are pruned. Requests come from distinct loopback addresses (127.0.0.0/8) so each
 * test has its own address counter. Latency under a flood is measured by `npm run bench`, not here.
 */

const USER = { email: 'owner@example.com', password: 'owner-passphrase-42' };
let clock = Date.parse('2031-03-01T00:00:00Z');
let s: TestServer;
let form: { cookie: string; token: string };

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn', now: () => clock });
  const admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  await createUser(admin, s.bootstrap.org_id, USER.email, 'owner', USER.password);
  form = await signInForm(s.url);
});
afterAll(async () => s?.close());

function randomEmail(): string {
  return `${randomBytes(6).toString('hex')}@flood.example`;
}

/** POST /dashboard/sign-in from a chosen loopback source address; the page's status and alert text. */
function signInFrom(localAddress: string, email: string, password: string): Promise<{ status: number; alert: string }> {
  const body = new URLSearchParams({ _csrf: form.token, email, password }).toString();
  return new Promise((resolve, reject) => {
    const req = http.request(`${s.url}/dashboard/sign-in`, {
      method: 'POST', localAddress, agent: false,
      headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, alert: /role="alert"[^>]*>([^<]*)</.exec(text)?.[1] ?? '' }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function failureRows(): Array<{ email: string; failures: number }> {
  return s.app.store.db.prepare('SELECT email, failures FROM dashboard_login_failures ORDER BY email').all() as Array<{ email: string; failures: number }>;
}

describe('per-address limit', () => {
  test(`error: ${MAX_FAILED_SIGN_INS_PER_ADDRESS} failures with different emails lock the address, even for a right password; other addresses are unaffected`, async () => {
    const from = '127.0.0.2';
    for (let i = 0; i < MAX_FAILED_SIGN_INS_PER_ADDRESS - 1; i++) {
      expect(await signInFrom(from, randomEmail(), 'wrong password')).toEqual({ status: 401, alert: 'Invalid email or password' });
    }
    const last = await signInFrom(from, randomEmail(), 'wrong password');
    expect([last.status, last.alert]).toEqual([429, 'Too many failed sign-ins from this network address; try again in 15 minutes']);
    const right = await signInFrom(from, USER.email, USER.password);
    expect([right.status, right.alert]).toEqual([429, 'Too many failed sign-ins from this network address; try again in 15 minutes']);
    // The locked address's attempts were refused before any password check: not counted per email.
    expect(failureRows().find((r) => r.email === USER.email)).toBeUndefined();
    expect((await signInFrom('127.0.0.3', USER.email, USER.password)).status).toBe(303);
  });

  test('behavior: a success gives the address its attempt back, so successes cannot reset a guessing run', async () => {
    const from = '127.0.0.4';
    for (let i = 0; i < 3; i++) expect((await signInFrom(from, randomEmail(), 'wrong password')).status).toBe(401);
    expect((await signInFrom(from, USER.email, USER.password)).status).toBe(303);
    expect(failureRows().find((r) => r.email === 'address 127.0.0.4')?.failures).toBe(3);
  });

  test('behavior: an IPv6 client is counted by its /64; IPv4-mapped addresses as IPv4', () => {
    expect(signInAddressKey('2001:db8:1:2:aaaa::1')).toBe('address 2001:db8:1:2::/64');
    expect(signInAddressKey('2001:DB8:1:2:ffff:ffff:ffff:ffff')).toBe('address 2001:db8:1:2::/64');
    expect(signInAddressKey('2001:db8::1')).toBe('address 2001:db8:0:0::/64');
    expect(signInAddressKey('::1')).toBe('address 0:0:0:0::/64');
    expect(signInAddressKey('fe80::1%eth0')).toBe('address fe80:0:0:0::/64');
    expect(signInAddressKey('::ffff:192.0.2.7')).toBe('address 192.0.2.7');
    expect(signInAddressKey('192.0.2.7')).toBe('address 192.0.2.7');
    expect(signInAddressKey(undefined)).toBe('address unknown');
    for (const key of ['192.0.2.7', '2001:db8::1', undefined].map(signInAddressKey)) expect(key).not.toContain('@');
  });
});

describe('failure rows', () => {
  test('behavior: rows of emails that failed more than a window ago are pruned by a later attempt', async () => {
    const old = [randomEmail(), randomEmail(), randomEmail()];
    for (const email of old) expect((await signInFrom('127.0.0.5', email, 'wrong password')).status).toBe(401);
    expect(failureRows().filter((r) => old.includes(r.email))).toHaveLength(3);
    clock += LOCKOUT_MS + LOGIN_FAILURE_PRUNE_MS;
    const fresh = randomEmail();
    expect((await signInFrom('127.0.0.6', fresh, 'wrong password')).status).toBe(401);
    const emails = failureRows().map((r) => r.email);
    expect(emails.filter((e) => old.includes(e))).toEqual([]);
    expect(emails).not.toContain('address 127.0.0.5');
    expect(emails).toContain(fresh);
  });

  test('behavior: above the row cap the unlocked rows with the oldest windows go first; locks stay', () => {
    const store = s.app.store;
    const now = clock;
    store.db.prepare("DELETE FROM dashboard_login_failures").run();
    for (let i = 0; i < 10; i++) store.loginFailures.put({ email: `cap${i}@example.com`, failures: 1, windowStart: now - 1000 + i, lockedUntil: 0 });
    store.loginFailures.put({ email: 'locked@example.com', failures: 0, windowStart: now - 5000, lockedUntil: now + LOCKOUT_MS });
    expect(store.loginFailures.prune(now - LOCKOUT_MS, now, 4)).toBe(7);
    expect(failureRows().map((r) => r.email)).toEqual(['cap7@example.com', 'cap8@example.com', 'cap9@example.com', 'locked@example.com']);
  });
});

describe('password hashing thread', () => {
  test('behavior: sign-in hashes run in a worker thread, not on the main thread', async () => {
    expect(isMainThread).toBe(true);
    expect((await signInFrom('127.0.0.7', randomEmail(), 'wrong password')).status).toBe(401);
    const ran = passwordHasherState().lastThreadId;
    expect(ran).toEqual(expect.any(Number));
    expect(ran).not.toBe(threadId);
  });

  test('behavior: a sign-in completes while every libuv pool thread is blocked', async () => {
    // Start the hashing thread first: a new thread loads its module through the pool.
    expect((await signInFrom('127.0.0.8', randomEmail(), 'wrong password')).status).toBe(401);
    // Each open() of a FIFO for reading occupies one pool thread until a writer opens it.
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-fifo-'));
    const size = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
    const fifos = Array.from({ length: size }, (_, i) => join(dir, `fifo-${i}`));
    for (const f of fifos) execFileSync('mkfifo', [f]);
    const readers = fifos.map((f) => open(f, 'r'));
    try {
      // With scrypt on the pool this would wait behind the FIFOs forever.
      const r = await signInFrom('127.0.0.8', randomEmail(), 'wrong password');
      expect([r.status, r.alert]).toEqual([401, 'Invalid email or password']);
    } finally {
      for (const f of fifos) {
        // Non-blocking write-open succeeds once the reader's open() is waiting; until then ENXIO.
        // Synchronous, on this thread: an async open would queue behind the blocked pool.
        for (;;) {
          try {
            closeSync(openSync(f, constants.O_WRONLY | constants.O_NONBLOCK));
            break;
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code !== 'ENXIO') throw err;
            await new Promise((resolve) => setImmediate(resolve));
          }
        }
      }
      for (const r of await Promise.all(readers)) await r.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(`error: beyond ${MAX_WAITING_SIGN_INS} waiting sign-ins the answer is an immediate 429, counted against nobody`, async () => {
    // Account hashes (never refused) keep the thread busy, so the sign-in queue stays full below.
    const ahead = Array.from({ length: 12 }, () => hashForAccount('x', randomBytes(16), { N: 32768, r: 8, p: 1 }, 32));
    const emails = Array.from({ length: MAX_WAITING_SIGN_INS + 4 }, randomEmail);
    // Started in one tick, from distinct addresses, so neither lockout is what refuses them.
    const attempts = emails.map((email, i) => signIn(s.app.deps, { email, password: 'wrong password', clientAddress: `192.0.2.${i + 1}` }).then(
      () => 'ok',
      (err: DomainError) => err.code,
    ));
    // Each attempt is counted in its own write before its hash is queued: once those writes have
    // run (in the order started), the first MAX_WAITING_SIGN_INS wait and the rest were refused.
    await vi.waitFor(() => expect(passwordHasherState().waitingSignIns).toBe(MAX_WAITING_SIGN_INS));
    const overHttp = await signInFrom('127.0.0.9', USER.email, USER.password);
    expect([overHttp.status, overHttp.alert]).toEqual([429, 'Too many sign-ins at once; try again in a few seconds']);
    const codes = await Promise.all(attempts);
    await Promise.all(ahead);
    expect(codes.filter((c) => c === 'invalid_credentials')).toHaveLength(MAX_WAITING_SIGN_INS);
    expect(codes.filter((c) => c === 'sign_in_busy')).toHaveLength(4);
    // Refused attempts left no trace in either counter.
    const rows = failureRows().map((r) => r.email);
    for (const email of emails.slice(MAX_WAITING_SIGN_INS)) expect(rows).not.toContain(email);
    expect(rows).not.toContain('address 127.0.0.9');
    expect(rows).not.toContain(USER.email);
    expect((await signInFrom('127.0.0.9', USER.email, USER.password)).status).toBe(303);
  });
});
