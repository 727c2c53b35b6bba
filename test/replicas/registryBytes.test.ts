import { ConnectError } from '@connectrpc/connect';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { MAX_PRIVATE_BYTES, MAX_RECORD_BYTES } from '../../src/app/registry/registry.js';
import { serviceFromProto } from '../../src/protoMapping/messages.js';
import { recordBytes } from '../../src/domain/recordBytes.js';
import type { ServiceRecord } from '../../src/domain/types.js';
import { createTenant } from '../helpers/admin.js';
import { sizedRecord } from '../helpers/registry.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * An organization's registry byte bound holds across replicas: each checks the organization's
 * total inside the write that stores (serializable on PostgreSQL), so upserts racing on several
 * replicas, each of which fits alone, cannot together leave the organization past the bound.
 */

let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ replicas: 2 });
}, 120_000);
afterAll(async () => c?.close(), 60_000);

const toProto = (r: ServiceRecord) => ({ ...r, endpoints: r.endpoints.map((e) => ({ ...e, priceAtomic: e.priceAtomic ?? undefined })) });

test('behavior: upserts racing on two replicas with room for two records keep two, refuse the rest, and the total stays within the bound', async () => {
  const org = await createTenant(c.admin(0), 'race-bytes');
  const room = 2 * MAX_RECORD_BYTES + 100;
  const fill = Math.ceil((MAX_PRIVATE_BYTES - room) / MAX_RECORD_BYTES);
  for (let i = 0; i < fill; i++) {
    const record = sizedRecord(`fill-${i}`, Math.min(MAX_RECORD_BYTES, MAX_PRIVATE_BYTES - room - i * MAX_RECORD_BYTES));
    await c.admin(i % 2).client.upsertService({ orgId: org.orgId, service: toProto(record) }, c.admin(i % 2).auth);
  }
  const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) => {
    const a = c.admin(i % 2);
    return a.client.upsertService({ orgId: org.orgId, service: toProto(sizedRecord(`race-${i}`, MAX_RECORD_BYTES)) }, a.auth)
      .then(() => 'kept', (e: unknown) => (e instanceof ConnectError && /registry_limit|bytes stored together/.test(`${e.metadata.get('x-error-code')} ${e.rawMessage}`) ? 'refused' : String(e)));
  }));
  expect(outcomes.filter((o) => o === 'kept')).toHaveLength(2);
  expect(outcomes.filter((o) => o === 'refused')).toHaveLength(10);

  const stored: ServiceRecord[] = [];
  let pageToken = '';
  do {
    const page = await c.admin(1).client.listServices({ orgId: org.orgId, pageSize: 500, pageToken }, c.admin(1).auth);
    stored.push(...page.services.map(serviceFromProto));
    pageToken = page.nextPageToken;
  } while (pageToken !== '');
  expect(stored.reduce((sum, r) => sum + recordBytes(r), 0)).toBe(MAX_PRIVATE_BYTES - 100);
}, 120_000);
