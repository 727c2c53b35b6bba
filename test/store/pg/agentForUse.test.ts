import pg from 'pg';
import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import type { AppDeps } from '../../../src/app/deps.js';
import { pingAgent } from '../../../src/app/organizations/ping.js';
import type { Agent, ApiKeyPrincipal } from '../../../src/domain/types.js';
import type { PaymentRow, StoreTables } from '../../../src/store/port.js';
import { createSql } from '../../../src/store/pg/sql.js';
import { createPgStore, type PgStore } from '../../../src/store/pg/store.js';
import { createPgTables } from '../../../src/store/pg/tables.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

/**
 * A payment's write reads the agent and its policy with `agents.getForUse`. Two stores stand in
 * for two replicas: A decides a payment on what it reads, B pauses the agent or lowers its cap.
 * Under SERIALIZABLE a plain read lets A commit a payment decided on the old row *after* B's
 * change was acknowledged (A is serialized before B, but answered after it): a pause that an
 * operator was told had taken effect would not bind a payment signed a moment later.
 */
let d: TestDatabase;
let a: PgStore;
let b: PgStore;
const ORG = 'org_foruse';
let seq = 0;
let agentId = '';

beforeAll(async () => {
  d = await createTestDatabase();
  a = await createPgStore({ connectionString: d.url, poolSize: 4 });
  b = await createPgStore({ connectionString: d.url, poolSize: 4 });
  await a.uow.write((tx) => tx.organizations.insert({ id: ORG, name: 'foruse', approvalWindowSeconds: 3600, createdAt: 1 }));
}, 60_000);
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await d?.drop();
});
beforeEach(async () => {
  agentId = `agt_foruse${String(++seq).padStart(8, '0')}`;
  await a.uow.write((tx) => tx.agents.insert({
    id: agentId, orgId: ORG, name: 'foruse', status: 'active', createdAt: 1, updatedAt: 1, lastPingAt: null,
    policy: { allowlist: [], spendCapMicros: 500_000n, approvalThresholdMicros: 0n, maxNetworkFeeWei: 10n ** 15n, maxPerPaymentMicros: null, limits: [], updatedAt: 1 },
  }));
});

function signedRow(): PaymentRow & { status: 'signed' } {
  seq++;
  return {
    id: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`, orgId: ORG, agentId, type: 'eip3009', status: 'signed',
    chainId: 8453, recipient: '0x' + '11'.repeat(20), amountMicros: 1_000n, reason: '', serviceSlug: '', resourceUrl: '',
    idempotencyKey: null, requestHash: 'h', request: '{}', result: '{}', approvalId: null, createdAt: Date.now(),
  };
}

const gate = () => {
  let open!: () => void;
  const opened = new Promise<void>((r) => { open = r; });
  return { opened, open };
};

/** B's change, acknowledged (its write resolved) or not yet, 300 ms after it was started. */
async function settleFor<T>(p: Promise<T>, ms: number): Promise<boolean> {
  let done = false;
  void p.then(() => { done = true; }, () => { done = true; });
  await new Promise((r) => setTimeout(r, ms));
  return done;
}

type Change = (agent: Agent) => Promise<void>;
const pause: Change = (agent) => b.uow.write((tx) => tx.agents.update(agent.id, agent.name, 'paused', Date.now()));
const lowerCap: Change = (agent) => b.uow.write((tx) => tx.agents.setPolicy(agent.id, { ...agent.policy, spendCapMicros: 0n, updatedAt: Date.now() }));

/** A's write: the agent as its decision saw it, on the attempt that committed. */
async function paymentDecidedOn(beforeRead: () => Promise<void>, afterRead: () => Promise<void>): Promise<Agent> {
  let attempt = 0;
  return a.uow.write(async (tx) => {
    const first = attempt++ === 0;
    // The transaction's snapshot is taken by its first statement, as a payment's key check does.
    await tx.organizations.get(ORG);
    if (first) await beforeRead();
    const agent = (await tx.agents.getForUse(agentId))!;
    if (first) await afterRead();
    if (agent.status === 'active' && agent.policy.spendCapMicros >= 1_000n) await tx.payments.insert(signedRow());
    return agent;
  });
}

for (const [name, change] of [['a pause', pause], ['a cap lowered to zero', lowerCap]] as const) {
  test(`${name} committed on B after A's snapshot but before A reads the agent: A decides on the change`, async () => {
    const original = (await a.agents.get(agentId))!;
    const seen = await paymentDecidedOn(() => change(original), async () => {});
    const changed = name === 'a pause' ? seen.status === 'paused' : seen.policy.spendCapMicros === 0n;
    expect(changed, JSON.stringify({ status: seen.status, cap: String(seen.policy.spendCapMicros) })).toBe(true);
    expect(await a.payments.committedSince(agentId, 0, Date.now() + 1)).toBe(0n);
  });

  test(`${name} on B while A holds the agent it read: not acknowledged until A's payment has committed`, async () => {
    const original = (await a.agents.get(agentId))!;
    const read = gate();
    const release = gate();
    let changeAcked: boolean | undefined;
    const payment = paymentDecidedOn(async () => {}, async () => { read.open(); await release.opened; });
    await read.opened;
    const changing = change(original);
    changeAcked = await settleFor(changing, 300);
    release.open();
    const seen = await payment;
    await changing;
    // Whatever A decided on, it must not be a row B had already been told it replaced.
    if (seen.status === 'active' && seen.policy.spendCapMicros !== 0n) expect(changeAcked).toBe(false);
    const after = (await b.agents.get(agentId))!;
    expect(name === 'a pause' ? after.status : after.policy.spendCapMicros).toBe(name === 'a pause' ? 'paused' : 0n);
  });
}

/** A registry record covering `baseUrl` for x402. */
const service = (slug: string, baseUrl: string) => ({
  id: `svc_${slug}`, slug, name: slug, description: '', category: '', logoUrl: '', docsUrl: '',
  paymentMethods: [{ realm: '', baseUrl, protocol: 'x402' as const }], endpoints: [],
});

/** Gives the test's agent an allowlist naming `slug`: its payments depend on the registry. */
const allowSlug = (slug: string) => a.uow.write(async (tx) => {
  const agent = (await tx.agents.get(agentId))!;
  await tx.agents.setPolicy(agentId, { ...agent.policy, allowlist: [slug], updatedAt: Date.now() });
});

/** The slugs of the records covering https://paid.example, as a deciding write on A reads them (after the agent). */
const coveringAsDecided = (tx: StoreTables) => async () => {
  await tx.agents.getForUse(agentId);
  const visible = await tx.services.visibleSummaries(ORG);
  return visible.filter((s) => s.paymentMethods.some((m) => m.baseUrl === 'https://paid.example')).map((s) => s.slug);
};

const registryChanges = [
  ['removed', (slug: string) => b.uow.write((tx) => tx.services.delete(slug, null).then(() => {}))],
  ['moved', (slug: string) => b.uow.write((tx) => tx.services.upsert(service(slug, 'https://elsewhere.example'), null, Date.now()).then(() => {}))],
  ['preceded by a new one', (slug: string) => b.uow.write((tx) => tx.services.upsert(service(`0-${slug}`, 'https://paid.example'), null, Date.now()).then(() => {}))],
] as const;

const cleanRegistry = (slug: string) => b.uow.write(async (tx) => {
  for (const s of [slug, `0-${slug}`]) await tx.services.delete(s, null);
});

for (const [name, change] of registryChanges) {
  test(`a service ${name} on B after A's snapshot but before A reads the agent and registry: A reads the registry as changed`, async () => {
    const slug = `svc-${++seq}`;
    await allowSlug(slug);
    await b.uow.write((tx) => tx.services.upsert(service(slug, 'https://paid.example'), null, Date.now()));
    let attempt = 0;
    const seen = await a.uow.write(async (tx) => {
      const first = attempt++ === 0;
      await tx.organizations.get(ORG);
      if (first) await change(slug);
      return coveringAsDecided(tx)();
    });
    expect(attempt).toBeGreaterThan(1);
    expect(seen[0]).not.toBe(slug);
    await cleanRegistry(slug);
  });

  test(`a service ${name} on B while A holds the agent and registry it read: not acknowledged until A has committed`, async () => {
    const slug = `svc-${++seq}`;
    await allowSlug(slug);
    await b.uow.write((tx) => tx.services.upsert(service(slug, 'https://paid.example'), null, Date.now()));
    const read = gate();
    const release = gate();
    let attempt = 0;
    const deciding = a.uow.write(async (tx) => {
      const first = attempt++ === 0;
      await tx.organizations.get(ORG);
      const seen = await coveringAsDecided(tx)();
      if (first) { read.open(); await release.opened; }
      return seen;
    });
    await read.opened;
    const changing = change(slug);
    const acked = await settleFor(changing, 300);
    release.open();
    const seen = await deciding;
    await changing;
    if (seen[0] === slug) expect(acked).toBe(false);
    await cleanRegistry(slug);
  });
}

test(`a ping on B while A holds the agent it read is not held back, and one committed after A's snapshot does not make A retry`, async () => {
  // Pings come from the paying agent itself, often; they change no field a payment decides on.
  const read = gate();
  const release = gate();
  let attempts = 0;
  let held = false;
  const payment = a.uow.write(async (tx) => {
    attempts++;
    await tx.organizations.get(ORG);
    if (attempts === 1) await b.uow.write((t) => t.agents.touchPing(agentId, Date.now()));
    const agent = (await tx.agents.getForUse(agentId))!;
    // On whichever run gets here first (a retry, if the first ping made the read fail).
    if (!held) { held = true; read.open(); await release.opened; }
    return agent;
  });
  await read.opened;
  const pinged = await settleFor(b.uow.write((t) => t.agents.touchPing(agentId, Date.now())), 300);
  release.open();
  await payment;
  expect(pinged).toBe(true);
  expect(attempts).toBe(1);
});


test('a registry import of many records in one write touches each slug agent once and no other record', async () => {
  await allowSlug(`imp-${++seq}`);
  const client = new pg.Client(d.url);
  await client.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
    const { rows: [slugAgents] } = await client.query<{ n: string }>(`SELECT count(*) AS n FROM policies p JOIN agents a ON a.id = p.agent_id
      WHERE a.org_id = $1 AND EXISTS (SELECT 1 FROM json_array_elements_text(p.allowlist::json) e WHERE e !~ '^0x[0-9a-fA-F]{40}$')`, [ORG]);
    const tables = createPgTables(createSql(client));
    for (let i = 0; i < 30; i++) await tables.services.upsert(service(`imp-${seq}-${i}`, `https://imp${i}.example`), ORG, Date.now());
    const { rows } = await client.query<{ relname: string; n_tup_upd: string }>(
      `SELECT relname, n_tup_upd FROM pg_stat_xact_user_tables WHERE relname IN ('policies', 'services') ORDER BY relname`);
    // Once per write, not once per record (an import was quadratic in the registry's size).
    expect(rows.map((r) => [r.relname, Number(r.n_tup_upd)])).toEqual([['policies', Number(slugAgents!.n)], ['services', 0]]);
    expect(Number(slugAgents!.n)).toBeGreaterThan(0);
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    await client.end();
  }
});

for (const scope of ['shared', 'private'] as const) {
  test(`pings of a slug agent while a ${scope} registry write is open do not make it fail to serialize`, async () => {
    // A ping reads the agent and writes last_ping_at; a registry write reads the agents in its
    // scope and writes their policy rows. Had the ping read the policy row too, the two would
    // form a read/write cycle the ping always won (it commits first): under pings of any slug
    // agent at 10/s a registry import never committed (40 of 40 attempts failed).
    const slug = `pinged-${++seq}`;
    await allowSlug(slug);
    const principal: ApiKeyPrincipal = { kind: 'api_key', orgId: ORG, mode: 'test', keyId: 'key_unused' };
    // pingAgent uses only the unit of work and the clock.
    const pingDeps = { uow: a.uow, now: Date.now } as unknown as AppDeps;
    const orgId = scope === 'shared' ? null : ORG;
    let attempts = 0;
    await b.uow.write(async (tx) => {
      attempts++;
      await tx.services.upsert(service(`${slug}-1`, 'https://one.example'), orgId, Date.now());
      if (attempts === 1) {
        for (let i = 0; i < 3; i++) await pingAgent(pingDeps, principal, agentId);
      }
      await tx.services.upsert(service(`${slug}-2`, 'https://two.example'), orgId, Date.now());
    });
    expect(attempts).toBe(1);
    await b.uow.write(async (tx) => {
      for (const s of [`${slug}-1`, `${slug}-2`]) await tx.services.delete(s, orgId);
    });
  });
}

test('a ping of the paying agent within a second of its last one does not make the payment retry', async () => {
  // An agent that pings as a health check, many times a second, while it pays: the ping's write
  // of last_ping_at and the payment's read of the agent row, with the ping's read of the ledger,
  // formed a read/write cycle that failed the payment (it ran again, every time).
  const principal: ApiKeyPrincipal = { kind: 'api_key', orgId: ORG, mode: 'test', keyId: 'key_unused' };
  const pingDeps = { uow: b.uow, now: Date.now } as unknown as AppDeps;
  await pingAgent(pingDeps, principal, agentId);
  let attempts = 0;
  await a.uow.write(async (tx) => {
    attempts++;
    await tx.agents.getForUse(agentId);
    await tx.payments.committedSince(agentId, Date.now() - 86_400_000, Date.now());
    if (attempts === 1) await pingAgent(pingDeps, principal, agentId);
    await tx.payments.insert(signedRow());
  });
  expect(attempts).toBe(1);
});
