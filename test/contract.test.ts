import type { DescMessage } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  GetAgentSpendResponseSchema,
  GetApprovalStatusResponseSchema,
  PingResponseSchema,
  QuoteResponseSchema,
  ResolveResponseSchema,
  ResolveResultSchema,
  SignRequestSchema,
  SignResponseSchema,
  file_paypolicy_v1_payment_policy,
} from '../gen/paypolicy/v1/payment_policy_pb.js';
import { PaymentMethodSchema, ServiceEndpointSchema, ServiceRecordSchema } from '../gen/paypolicy/v1/registry_pb.js';
import {
  AGENT_SPEND_FIELDS,
  APPROVAL_STATUS_FIELDS,
  ENDPOINT_FIELDS,
  PAYMENT_METHOD_FIELDS,
  PING_FIELDS,
  QUOTE_FIELDS,
  RESOLVE_FIELDS,
  REST_ONLY,
  SERVICE_FIELDS,
  SIGN_FIELDS,
  type RestField,
} from '../src/rest/mappers.js';
import { REST_ROUTES } from '../src/rest/routes.js';
import { postSign } from './helpers/payments.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * The REST surface is a declared mapping of the proto messages (src/rest/mappers.ts). These tests
 * enumerate the protobuf-es descriptors and fail when a proto field has no REST counterpart, or a
 * REST key names no proto field, beyond the documented REST_ONLY list.
 */

/** Every leaf field path of a message: singular sub-messages are entered (except Timestamps), lists are leaves. */
function protoPaths(schema: DescMessage, prefix = ''): string[] {
  return schema.fields.flatMap((f) =>
    f.fieldKind === 'message' && f.message.typeName !== 'google.protobuf.Timestamp'
      ? protoPaths(f.message, `${prefix}${f.name}.`)
      : [`${prefix}${f.name}`]);
}

/** The proto paths a REST table writes from, and its REST keys that come from no proto field. */
function tablePaths(fields: readonly RestField[], prefix = '', restPrefix = ''): { proto: string[]; restOnly: string[] } {
  const proto: string[] = [];
  const restOnly: string[] = [];
  for (const f of fields) {
    if (f.proto === undefined) restOnly.push(`${restPrefix}${f.rest}`);
    else if (f.fields) {
      const sub = tablePaths(f.fields, `${prefix}${f.proto}.`, `${restPrefix}${f.rest}.`);
      proto.push(...sub.proto);
      restOnly.push(...sub.restOnly);
    } else proto.push(`${prefix}${f.proto}`);
  }
  return { proto, restOnly };
}

/** Proto fields without a REST key, and REST keys (not declared REST-only) without a proto field. */
function mismatch(schema: DescMessage, tables: ReadonlyArray<readonly RestField[]>, restOnlyPrefix: string) {
  const wanted = new Set(protoPaths(schema));
  const paths = tables.map((t) => tablePaths(t));
  const mapped = new Set(paths.flatMap((p) => p.proto));
  const declaredRestOnly = Object.keys(REST_ONLY).filter((k) => k.startsWith(restOnlyPrefix));
  return {
    protoWithoutRest: [...wanted].filter((p) => !mapped.has(p)).sort(),
    restWithoutProto: [...mapped].filter((p) => !wanted.has(p)).sort(),
    undeclaredRestOnly: paths.flatMap((p) => p.restOnly).filter((k) => !declaredRestOnly.some((d) => d.endsWith(`.${k}`))),
  };
}

const NONE = { protoWithoutRest: [], restWithoutProto: [], undeclaredRestOnly: [] };

describe('REST ↔ proto field mapping (responses)', () => {
  test.each([
    ['PingResponse', PingResponseSchema, [PING_FIELDS]],
    ['GetApprovalStatusResponse', GetApprovalStatusResponseSchema, [APPROVAL_STATUS_FIELDS]],
    ['GetAgentSpendResponse', GetAgentSpendResponseSchema, [AGENT_SPEND_FIELDS]],
    ['QuoteResponse', QuoteResponseSchema, [QUOTE_FIELDS]],
    ['ResolveResponse', ResolveResponseSchema, [RESOLVE_FIELDS]],
    ['ServiceRecord', ServiceRecordSchema, [SERVICE_FIELDS]],
    ['PaymentMethod', PaymentMethodSchema, [PAYMENT_METHOD_FIELDS]],
    ['ServiceEndpoint', ServiceEndpointSchema, [ENDPOINT_FIELDS]],
    ['SignResponse', SignResponseSchema, Object.values(SIGN_FIELDS)],
  ] as Array<[string, DescMessage, ReadonlyArray<readonly RestField[]>]>)('behavior: every %s field has a REST key and every REST key a field', (name, schema, tables) => {
    expect(mismatch(schema, tables, `${name}.`)).toEqual(NONE);
  });

  test('behavior: ResolveResult is the REST results object: slug is the key, service the value', () => {
    // RESOLVE_FIELDS writes `results` as { [slug]: service | null }; hold that to ResolveResult's fields.
    expect(ResolveResultSchema.fields.map((f) => f.name)).toEqual(['slug', 'service']);
  });

  test('behavior: the check catches a proto field REST drops and a REST key with no proto field', () => {
    // The gap this replaced: RPC dropped resource_url and the MPP transaction hash; here REST drops one.
    const withoutResourceUrl = SIGN_FIELDS.signed.filter((f) => f.rest !== 'resource_url');
    const tables = [withoutResourceUrl, SIGN_FIELDS.pending, SIGN_FIELDS.denied, SIGN_FIELDS.dryRun];
    expect(mismatch(SignResponseSchema, tables, 'SignResponse.').protoWithoutRest).toEqual(['resource_url']);
    const invented: RestField[] = [...PING_FIELDS, { rest: 'nickname', proto: 'nickname' }, { rest: 'motto', write: () => 'hi' }];
    expect(mismatch(PingResponseSchema, [invented], 'PingResponse.')).toEqual({
      protoWithoutRest: [], restWithoutProto: ['nickname'], undeclaredRestOnly: ['motto'],
    });
  });
});

describe('REST ↔ proto field mapping (requests)', () => {
  test('behavior: every request field of PaymentPolicyService has a declared REST place, and only those', () => {
    const requests = file_paypolicy_v1_payment_policy.messages.filter((m) => m.name.endsWith('Request'));
    const places = Object.fromEntries(REST_ROUTES.map((r) => [r.rpc.input.typeName, r.request]));
    expect(requests.map((m) => m.typeName).sort()).toEqual(Object.keys(places).sort());
    for (const m of requests) {
      expect(Object.keys(places[m.typeName]!).sort(), m.typeName).toEqual(m.fields.map((f) => f.name).sort());
    }
  });

  describe('SignRequest.payload members: their field names are the REST payload keys', () => {
    let s: TestServer;
    beforeAll(async () => {
      s = await startTestServer();
    });
    afterAll(async () => {
      await s?.close();
    });

    const members = SignRequestSchema.oneofs.find((o) => o.name === 'payload')!.fields;
    /** A value each payload field refuses, so the 400 names the key REST read it from. */
    const BAD: Record<string, unknown> = { valid_for_seconds: 5, gas: 1, max_fee_per_gas: 0, max_priority_fee_per_gas: 'x', resource_url: '', method: 'PUT', max_amount_usd: 'abc' };
    const cases = members.flatMap((m) => m.message!.fields.map((f) => [m.name, f.name] as const));

    test('behavior: the members are named after the payment types', () => {
      expect(members.map((m) => m.name)).toEqual(['eip3009', 'permit2', 'raw_transaction', 'x402', 'mpp']);
    });

    test.each(cases)('error: REST type %s with payload.%s out of range is a 400 naming that key', async (type, key) => {
      const direct = type === 'x402' || type === 'mpp' ? {} : { recipient_address: '0x2096aBCdEf0123456789aBCDeF0123456789287C', amount_usd: '0.5' };
      const payload = type === 'x402' || type === 'mpp' ? { resource_url: 'https://paywall.example/x', [key]: BAD[key] } : { [key]: BAD[key] };
      const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: s.bootstrap.agent_id, type, ...direct, payload });
      expect(r.status, r.text).toBe(400);
      expect(r.json.error).toContain(`payload.${key}`);
    });
  });
});
