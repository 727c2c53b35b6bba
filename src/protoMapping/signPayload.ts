import { ScalarType, type DescField, type DescMessage } from '@bufbuild/protobuf';
import { SignRequestSchema } from '../../gen/paypolicy/v1/payment_policy_pb.js';

/** SignRequest's `payload` oneof: one member per payment type, named after it (`eip3009` … `mpp`). */
export const SIGN_PAYLOAD_MEMBERS = SignRequestSchema.oneofs.find((o) => o.name === 'payload')!.fields;

/** The payload message of a payment type as REST names it (`type`); undefined for a name that is none. */
export function signPayloadMessage(type: unknown): DescMessage | undefined {
  return SIGN_PAYLOAD_MEMBERS.find((f) => f.name === type)?.message;
}

const INTEGER_SCALARS: ReadonlySet<ScalarType> = new Set([
  ScalarType.INT32, ScalarType.UINT32, ScalarType.SINT32, ScalarType.FIXED32, ScalarType.SFIXED32,
  ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64,
]);

/** Whether the field holds one integer (a list or map of them is not one). */
export function isIntegerField(field: DescField): boolean {
  return field.fieldKind === 'scalar' && INTEGER_SCALARS.has(field.scalar);
}
