import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ServiceRecordSchema } from '../../gen/paypolicy/v1/registry_pb.js';
import { DomainError } from '../domain/errors.js';
import { serviceFromWireJson } from '../domain/serviceRecordJson.js';
import { serviceToProto } from '../protoMapping/messages.js';
import { UsageError } from './errors.js';

/** A registry record ready for UpsertService. */
export type ServiceRecordInit = MessageInitShape<typeof ServiceRecordSchema>;

/**
 * Reads a registry record in the wire protocol's JSON shape (the one parser the dashboard's
 * import uses too) for `service upsert --file`. A malformed file is the user's usage error, so
 * it is reported before anything is sent; slug and name are checked here for the same reason.
 */
export function serviceRecordFromJson(value: unknown, where: string): ServiceRecordInit {
  let record;
  try {
    record = serviceFromWireJson(value, where);
  } catch (err) {
    if (err instanceof DomainError) throw new UsageError(err.shortMessage);
    throw err;
  }
  if (record.slug === '') throw new UsageError(`${where}.slug is required`);
  if (record.name === '') throw new UsageError(`${where}.name is required`);
  return serviceToProto(record);
}
