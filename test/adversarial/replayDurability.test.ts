import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { createAgent, type Admin } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { postSign, recoverAuthorizationSigner, setPolicy, type SignBody } from '../helpers/payments.js';
import { bearer } from '../helpers/rpc.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createWalSync } from '../../src/store/walSync.js';
import { createWriteQueue } from '../../src/store/writeQueue.js';
import { fdatasync } from 'node:fs';
import { join } from 'node:path';

/**
 * Invariant 2 for replays: an approved payment's signature reached a polling agent before the
 * settling commit was synced, and a power cut then lost the row (and its hold). Here the server's
 * WAL sync is held by the test, like a slow disk: nothing that carries the signature may be
 * answered until the sync that covers its row has finished.
 */

const RECIPIENT = '0x2222222222222222222222222222222222222222';

let s: TestServer;
let admin: Admin;

/** A WAL sync the test releases: calls queue up until `release` lets them reach the disk. */
function heldSync() {
  const held: Array<() => void> = [];
  let waiting: (() => void) | undefined;
  return {
    sync(fd: number, done: (err: NodeJS.ErrnoException | null) => void) {
      held.push(() => fdatasync(fd, done));
      waiting?.();
    },
    /** Resolves when at least `n` syncs have been asked for. */
    async requested(n: number) {
      while (held.length < n) await new Promise<void>((r) => (waiting = r));
    },
    release(i: number) {
      held[i]!();
    },
  };
}

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
});
afterAll(async () => s.close());

describe('replay durability', () => {
  test('behavior: a repeat that collects an approved signature is answered only after the settling commit is synced', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'held-sync');
    await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '1' });
    const body: SignBody = { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '5' };
    const first = await postSign(s.url, s.bootstrap.api_key, body, 'held-1');
    expect(first.status, first.text).toBe(202);

    // From here on every group commit waits for the test to let its WAL sync through.
    const store = s.app.store;
    const sync = heldSync();
    store.writes = createWriteQueue(store.db, createWalSync(join(s.dataDir, 'paypolicy.db-wal'), sync.sync), store.tx);

    let decided = false;
    const decision = admin.client
      .decideApproval({ id: first.json.approval_request_id, decision: Decision.APPROVE, note: '', decidedBy: 'alice' }, admin.auth)
      .then(() => (decided = true));
    await sync.requested(1); // the settle of the signed row is committed, its sync held

    let answered = false;
    const repeat = postSign(s.url, s.bootstrap.api_key, body, 'held-1').then((r) => {
      answered = true;
      return r;
    });
    // The repeat must not get past the held sync: give it every chance to answer early.
    const early = await Promise.race([repeat.then(() => 'answered'), new Promise((r) => setTimeout(r, 400, 'waiting'))]);
    expect(early).toBe('waiting');
    expect(answered).toBe(false);
    expect(decided).toBe(false);

    sync.release(0);
    await sync.requested(2); // the repeat's own barrier started after its read
    sync.release(1);
    const collected = await repeat;
    await decision;
    expect(collected.status, collected.text).toBe(200);
    expect(collected.json.idempotent).toBe(true);
    expect((await recoverAuthorizationSigner(collected.json.signature, collected.json.authorization)).toLowerCase()).toBe(s.bootstrap.treasury_address.toLowerCase());
  });
});
