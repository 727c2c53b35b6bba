import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { attributeResource } from '../../../src/domain/attribution.js';
import { createPgStore, type PgStore } from '../../../src/store/pg/store.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';
import { serviceRecord } from '../../helpers/registry.js';

/**
 * Each replica keeps the registry's attribution index in memory; another replica may change the
 * registry at any moment. Every use checks the scope's version (migration 0013), so a change
 * committed on one replica is what the next attribution on another one sees, a transaction sees
 * the registry of its own snapshot, and what a rolled-back transaction saw is never taken for
 * committed state.
 */
const ORG = 'org_registry_index';
const URL_PAID = 'https://svc.example/v1/paid';
describe('the registry index of one replica under another replica\'s changes', () => {
  let d: TestDatabase;
  let one: PgStore;
  let two: PgStore;
  beforeAll(async () => {
    d = await createTestDatabase();
    one = await createPgStore({ connectionString: d.url, poolSize: 2 });
    two = await createPgStore({ connectionString: d.url, poolSize: 2 });
    await one.uow.write((tx) => tx.organizations.insert({ id: ORG, name: 'Org', approvalWindowSeconds: 3600, createdAt: 0 }));
  }, 30_000);
  afterAll(async () => {
    await one?.close();
    await two?.close();
    await d?.drop();
  });

  const slugOn = async (store: Pick<PgStore, 'services'>) => {
    const a = attributeResource(await store.services.visibleIndex(ORG), [URL_PAID], 'x402', null, []);
    return a.attributed ? a.slug : null;
  };

  test('behavior: a private and a shared record added, moved or removed on one replica is what the other attributes next', async () => {
    expect(await slugOn(one)).toBe(null); // cached: nothing registered
    await two.uow.write((tx) => tx.services.upsert(serviceRecord('own', ['https://svc.example/v1']), ORG, 1));
    expect(await slugOn(one)).toBe('own');
    await two.uow.write((tx) => tx.services.upsert(serviceRecord('own', ['https://elsewhere.example/v1']), ORG, 2));
    expect(await slugOn(one)).toBe(null);
    await two.uow.write((tx) => tx.services.upsert(serviceRecord('shared', ['https://svc.example/']), null, 3));
    expect(await slugOn(one)).toBe('shared');
    await two.uow.write((tx) => tx.services.delete('shared', null));
    expect(await slugOn(one)).toBe(null);
  });

  test('behavior: a transaction attributes by its own snapshot; the change committed meanwhile is seen after it', async () => {
    await two.uow.write((tx) => tx.services.upsert(serviceRecord('snap', ['https://svc.example/v1']), ORG, 4));
    const seen = await one.uow.write(async (tx) => {
      const before = await slugOn(tx);
      await two.uow.write((tx2) => tx2.services.delete('snap', ORG));
      return [before, await slugOn(tx)];
    });
    expect(seen).toEqual(['snap', 'snap']);
    expect(await slugOn(one)).toBe(null);
    expect(await slugOn(two)).toBe(null);
  });

  test('behavior: one replica keeps one cache: transactions and the pool read a scope from it, not again each', async () => {
    await two.uow.write((tx) => tx.services.upsert(serviceRecord('cached', ['https://cached.example/v1']), ORG, 6));
    const first = await one.uow.write((tx) => tx.services.summaries(ORG));
    expect(first.map((x) => x.slug)).toContain('cached');
    expect(await one.uow.write((tx) => tx.services.summaries(ORG))).toBe(first);
    expect(await one.uow.read((tx) => tx.services.summaries(ORG))).toBe(first);
    expect(await one.services.summaries(ORG)).toBe(first);
    await two.uow.write((tx) => tx.services.delete('cached', ORG));
    expect((await one.services.summaries(ORG)).map((x) => x.slug)).not.toContain('cached');
  });

  test('behavior: what a rolled-back transaction saw of its own change is never attributed after it', async () => {
    const refused = one.uow.write(async (tx) => {
      await tx.services.upsert(serviceRecord('rolled-back', ['https://svc.example/v1']), ORG, 5);
      expect(await slugOn(tx)).toBe('rolled-back');
      throw new Error('roll back');
    });
    await expect(refused).rejects.toThrow('roll back');
    expect(await slugOn(one)).toBe(null);
  });
});
