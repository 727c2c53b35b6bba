import { ScalarType, type DescField, type DescMessage } from '@bufbuild/protobuf';
import {
  GetAgentSpendResponseSchema,
  GetApprovalStatusResponseSchema,
  PingResponseSchema,
  QuoteResponseSchema,
  ResolveResponseSchema,
  SignResponseSchema,
} from '../../gen/paypolicy/v1/payment_policy_pb.js';
import {
  AGENT_SPEND_FIELDS,
  APPROVAL_STATUS_FIELDS,
  jsonShape,
  PING_FIELDS,
  QUOTE_FIELDS,
  RESOLVE_FIELDS,
  SIGN_FIELDS,
  type RestField,
} from './mappers.js';
import { REST_ROUTES, type FieldPlace, type ResponseSpec, type RestRoute } from './routes.js';

/**
 * The OpenAPI 3.1 description of the REST surface (/api/*), served at GET /api/openapi.json,
 * generated at load from the route table (routes.ts: paths, parameters, statuses) and the proto
 * descriptors: request bodies from each RPC's request message and the places its fields come from,
 * answers from the response message and the mapper table that writes it (mappers.ts). Nothing in it
 * is written by hand but the summaries and status descriptions of the table, so it cannot describe
 * a field the server does not read or write. test/openapi.test.ts validates real answers of every
 * endpoint and status against it (JSON Schema 2020-12). Schemas are closed
 * (`additionalProperties: false`).
 */

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Schema) => ({ 'application/json': { schema } });
const digits: Schema = { type: 'string', pattern: '^[0-9]+$' };
const usdInput: Schema = { oneOf: [{ type: 'number', description: 'USD as a JSON number with at most 6 decimals' }, { type: 'string', pattern: '^[0-9]+(\\.[0-9]{1,6})?$', description: 'USD as a decimal string' }] };

/** The REST names of an enum's values: PAYMENT_TYPE_RAW_TRANSACTION is raw_transaction. */
function enumNames(field: DescField): string[] {
  return field.enum ? field.enum.values.filter((v) => v.number !== 0).map((v) => v.localName.toLowerCase()) : [];
}

function scalarSchema(scalar: ScalarType): Schema {
  switch (scalar) {
    case ScalarType.STRING:
      return { type: 'string' };
    case ScalarType.BOOL:
      return { type: 'boolean' };
    case ScalarType.INT64: case ScalarType.UINT64: case ScalarType.SINT64: case ScalarType.FIXED64: case ScalarType.SFIXED64:
      return digits;
    default:
      return { type: 'integer' };
  }
}

/** The field at a dotted path of proto names. */
function fieldAt(desc: DescMessage, path: string): DescField {
  const [head, ...rest] = path.split('.');
  const field = desc.fields.find((f) => f.name === head);
  if (!field) throw new Error(`${desc.typeName} has no field ${head}`);
  return rest.length === 0 ? field : fieldAt(field.message!, rest.join('.'));
}

function nullable(schema: Schema): Schema {
  if (typeof schema.type === 'string') return { ...schema, type: [schema.type, 'null'] };
  return { oneOf: [schema, { type: 'null' }] };
}

/** The JSON schema of one REST key written from `desc` by its table entry. */
function answerFieldSchema(f: RestField, desc: DescMessage): Schema {
  const shape = jsonShape(f);
  if (shape?.const !== undefined) return { const: shape.const };
  const field = fieldAt(desc, f.proto!);
  if (f.fields) return answerSchema(f.fields, field.message!);
  let schema: Schema;
  if (shape?.enum) schema = { type: 'string', enum: [...shape.enum] };
  else if (shape?.usdNumber) schema = { type: 'number', description: 'USD as a JSON number with at most 6 decimals' };
  else if (shape?.dateTime) schema = { type: 'string', format: 'date-time' };
  else if (shape?.items) schema = { type: 'array', items: answerSchema(shape.items(), field.message!) };
  else if (shape?.keyedBy) {
    const { value, fields } = shape.keyedBy;
    schema = { type: 'object', additionalProperties: nullable(answerSchema(fields(), fieldAt(field.message!, value).message!)) };
  } else if (field.fieldKind === 'scalar') schema = scalarSchema(field.scalar);
  else if (field.fieldKind === 'list' && field.listKind === 'scalar') schema = { type: 'array', items: scalarSchema(field.scalar) };
  else if (field.fieldKind === 'enum') schema = { type: 'string', enum: enumNames(field) };
  else throw new Error(`${desc.typeName}.${f.proto}: no JSON shape for REST key ${f.rest}`);
  return shape?.nullable ? nullable(schema) : schema;
}

/** A closed object of a mapper table: every key it always writes is required. */
function answerSchema(fields: readonly RestField[], desc: DescMessage): Schema {
  const properties: Record<string, Schema> = {};
  const required: string[] = [];
  for (const f of fields) {
    properties[f.rest] = answerFieldSchema(f, desc);
    if (!f.fields && !jsonShape(f)?.optional) required.push(f.rest);
  }
  return { type: 'object', properties, required, additionalProperties: false };
}

/** The schema of a request field's REST value. */
function requestFieldSchema(field: DescField, place: FieldPlace): Schema {
  if (place.in === 'query') return { type: 'array', items: { type: 'string' } };
  if (place.in === 'body' && 'usdText' in place && place.usdText === true) return usdInput;
  if (field.fieldKind === 'enum') return { type: 'string', enum: enumNames(field) };
  if (field.fieldKind === 'scalar') {
    const s = scalarSchema(field.scalar);
    // A 64-bit integer is read from a JSON number or its decimal string.
    return s === digits ? { oneOf: [{ type: 'integer' }, digits] } : s;
  }
  throw new Error(`${field.parent.typeName}.${field.name}: no REST shape`);
}

/** The JSON body of a route: its body keys, with a oneof's members merged into the one object they are read from. */
function requestBodySchema(r: RestRoute): Schema {
  const properties: Record<string, Schema> = {};
  for (const field of r.rpc.input.fields) {
    const place = r.request[field.name]!;
    if (place.in !== 'body' && place.in !== 'body_or_header') continue;
    if (place.in === 'body' && 'member' in place) {
      const member = (properties[place.key] ??= {
        type: 'object', properties: {}, additionalProperties: false,
        description: `The fields of the ${field.oneof?.name ?? field.name} member named by \`${place.member.chosenBy}\` (\`${place.member.otherwise}\` when it is left out), and no other`,
      }) as { properties: Record<string, Schema> };
      for (const f of field.message!.fields) {
        member.properties[f.name] ??= place.usdText?.includes(f.name) ? usdInput : requestFieldSchema(f, { in: 'body', key: f.name });
      }
      continue;
    }
    properties[place.key] = requestFieldSchema(field, place);
  }
  return { type: 'object', properties, additionalProperties: false };
}

function parameters(r: RestRoute): Schema[] {
  const out: Schema[] = [];
  for (const field of r.rpc.input.fields) {
    const place = r.request[field.name]!;
    if (place.in === 'path') out.push({ name: place.param, in: 'path', required: true, schema: { type: 'string' } });
    if (place.in === 'query') for (const name of place.names) out.push({ name, in: 'query', schema: requestFieldSchema(field, place), style: 'form', explode: true });
    if (place.in === 'body_or_header') {
      out.push({ name: place.header, in: 'header', required: false, description: `The body's \`${place.key}\`; when both are sent they must be equal`, schema: requestFieldSchema(field, place) });
    }
  }
  return out;
}

const HEADERS = {
  Allow: { description: 'The methods this path answers', schema: { type: 'string' } },
  'Retry-After': { description: 'Seconds to wait before retrying (with `overloaded`)', schema: { type: 'string', pattern: '^[0-9]+$' } },
} as const;

function response(spec: ResponseSpec): Schema {
  const body = spec.body && (spec.body.length === 1 ? ref(spec.body[0]!) : { oneOf: spec.body.map(ref) });
  return {
    description: spec.description,
    ...(body ? { content: json(body) } : {}),
    ...(spec.headers ? { headers: Object.fromEntries(spec.headers.map((h) => [h, HEADERS[h]])) } : {}),
  };
}

function operation(r: RestRoute): Schema {
  const params = parameters(r);
  return {
    operationId: r.rpc.localName,
    summary: r.summary,
    description: `Answered by ${r.rpc.parent.typeName}/${r.rpc.name}.`,
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(r.method === 'POST' ? { requestBody: { required: true, content: json(ref(r.rpc.input.name)) } } : {}),
    responses: Object.fromEntries(Object.entries(r.responses).map(([status, spec]) => [status, response(spec)])),
  };
}

/** The answer bodies by schema name, each a mapper table over its response message. */
const ANSWERS: Record<string, [readonly RestField[], DescMessage]> = {
  Ping: [PING_FIELDS, PingResponseSchema],
  Resolve: [RESOLVE_FIELDS, ResolveResponseSchema],
  SignSigned: [SIGN_FIELDS.signed, SignResponseSchema],
  SignPending: [SIGN_FIELDS.pending, SignResponseSchema],
  SignDenied: [SIGN_FIELDS.denied, SignResponseSchema],
  SignDryRun: [SIGN_FIELDS.dryRun, SignResponseSchema],
  Quote: [QUOTE_FIELDS, QuoteResponseSchema],
  ApprovalStatus: [APPROVAL_STATUS_FIELDS, GetApprovalStatusResponseSchema],
  AgentSpend: [AGENT_SPEND_FIELDS, GetAgentSpendResponseSchema],
};

function buildDocument() {
  const paths: Record<string, Record<string, Schema>> = {};
  for (const r of REST_ROUTES) (paths[r.path] ??= {})[r.method.toLowerCase()] = operation(r);
  paths['/api/openapi.json'] = {
    get: {
      operationId: 'getOpenApi',
      summary: 'This document (no credential needed)',
      security: [],
      responses: { '200': { description: 'The OpenAPI document', content: json({ type: 'object', required: ['openapi', 'paths'] }) } },
    },
  };
  const schemas: Record<string, Schema> = {
    Error: {
      type: 'object',
      properties: { error: { type: 'string', description: 'a short message for humans' }, code: { type: 'string', description: 'a machine code; see docs/errors.md' } },
      required: ['error', 'code'],
      additionalProperties: false,
    },
  };
  for (const [name, [fields, desc]] of Object.entries(ANSWERS)) schemas[name] = answerSchema(fields, desc);
  for (const r of REST_ROUTES) if (r.method === 'POST') schemas[r.rpc.input.name] = requestBodySchema(r);
  return {
    openapi: '3.1.0',
    info: {
      title: 'paypolicy REST API',
      version: '1',
      description:
        'The agent surface of paypolicy: payments checked against a per-agent policy, then signed (200), queued for a human (202) or refused (403). ' +
        'Each operation is an RPC of the Connect/gRPC service paypolicy.v1.PaymentPolicyService, read from and written to REST JSON by a declared mapping. ' +
        'Money is USD; error bodies are `{"error", "code"}`.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    servers: [{ url: '/' }],
    security: [{ apiKey: [] }],
    paths,
    components: {
      securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: `ak_live_` or `ak_test_` + 48 hex characters' } },
      schemas,
    },
  };
}

export const OPENAPI_DOCUMENT = buildDocument();
