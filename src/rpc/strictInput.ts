import type { DescEnum, DescMessage } from '@bufbuild/protobuf';
import type { Interceptor } from '@connectrpc/connect';
import { PaymentTypeSchema } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { invalidArgument } from '../domain/errors.js';
import { JsonDuplicateKeyError, numberText, parseJson } from '../http/parseJson.js';

/**
 * Every RPC request is read strictly, whatever the protocol: what the server does not understand
 * is refused with invalid_argument naming it, never dropped. A dropped field or value turns a
 * request into another one that succeeds (an UpdateAgent whose status was not understood leaves
 * the agent active and answers OK), and the caller is told it worked.
 *
 * - JSON (Connect, gRPC-Web and gRPC with +json): unknown fields and enum names the contract does
 *   not declare are refused by protobuf-es itself (`ignoreUnknownFields: false`; connect's default
 *   is to ignore them), and a key repeated in one object, or a number not written as an integer
 *   (the contract has no other kind), by the checking parser before protobuf-es sees the text (its
 *   JSON.parse would keep the last key silently, and read 84530e-1 as 8453).
 * - Binary: protobuf-es keeps fields it does not know in `$unknown`, and takes any number for an
 *   enum (proto3 enums are open); the interceptor refuses both, in every message of the request.
 *
 * Both the unary fast path (unaryHandler.ts) and connect-node take RPC_JSON_OPTIONS, and both run
 * strictInputInterceptor, so no RPC escapes either. protobuf-es refuses an undeclared enum name
 * without naming its field; the fast path (every unary Connect and gRPC call) finds the field with
 * undeclaredJsonEnum, while connect-node's answer (gRPC-Web with +json) names only the enum type.
 */

const utf8 = new TextDecoder();

/**
 * What the decoder hands protobuf-es: the text, once it is known to hold no duplicate key, no null
 * and no number written otherwise than as an integer. The contract has no floating-point field, so every
 * number of a request is an integer field's (or an enum's), and JSON.parse would read
 * 8453.00000000000001 or 84530e-1 as 8453: a value the client did not write.
 */
const strictTextDecoder = {
  decode(bytes: Uint8Array): string {
    const text = utf8.decode(bytes);
    let json: unknown;
    try {
      json = parseJson(text);
    } catch (e) {
      // Syntax errors are left to protobuf-es, whose answer for them callers already see.
      if (e instanceof JsonDuplicateKeyError) throw new Error(`invalid request message: ${e.message}`);
      return text;
    }
    const inexact = notWrittenAsInteger(json, '');
    if (inexact) throw new Error(`invalid request message: ${inexact}`);
    return text;
  },
};

/** The first null, or number not written as an integer (digits, an optional minus), in `json`, described with its path; else undefined. */
function notWrittenAsInteger(json: unknown, path: string): string | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const array = Array.isArray(json);
  for (const [key, v] of Object.entries(json)) {
    const where = array ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`;
    if (typeof v === 'number') {
      const text = numberText(json, key)!;
      if (!/^-?\d+$/.test(text)) return `${where.slice(0, 100)}: ${text.slice(0, 40)} is not written as an integer (digits, without a fraction or an exponent)`;
    } else if (v === null) {
      // proto3 JSON reads null as "unset": an idempotency key, a dry run or a price ceiling sent as
      // null would silently be none. The contract has no field where null means anything else.
      return `${where.slice(0, 100)}: null is not a value (leave the field out for its default)`;
    } else {
      const found = notWrittenAsInteger(v, where);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * The JSON read options of every RPC handler. `textDecoder` is read by connect's JSON
 * serialization (protocol/serialization.ts) though its handler options do not declare it.
 */
export const RPC_JSON_OPTIONS = { ignoreUnknownFields: false, textDecoder: strictTextDecoder } as const;

/** Refuses a request message holding unknown fields or undeclared enum numbers (invalid_argument). */
export const strictInputInterceptor: Interceptor = (next) => async (req) => {
  if (!req.stream) checkMessage(req.method.input, req.message as unknown as Record<string, unknown>, '');
  return next(req);
};

const declared = new WeakMap<DescEnum, Set<number>>();

function enumRefusal(desc: DescEnum, value: unknown, path: string): string {
  return `${path}: ${JSON.stringify(value)} is not a value of ${desc.typeName} (one of ${desc.values.map((v) => v.name).join(', ')})`;
}

function checkEnum(desc: DescEnum, value: unknown, path: string): void {
  let numbers = declared.get(desc);
  if (!numbers) declared.set(desc, (numbers = new Set(desc.values.map((v) => v.number))));
  if (typeof value === 'number' && numbers.has(value)) return;
  // A payment type the server does not know keeps the code REST answers for it.
  if (desc.typeName === PaymentTypeSchema.typeName) throw invalidArgument(enumRefusal(desc, value, path), 'unsupported_type');
  throw invalidArgument(enumRefusal(desc, value, path));
}

/**
 * protobuf-es refuses an enum name it does not know without saying in which field; this finds the
 * field in the JSON text of a request that failed so, for the error to name it. Undefined when the
 * text holds no such value (the error was another one).
 */
export function undeclaredJsonEnum(desc: DescMessage, text: string): string | undefined {
  let json: unknown;
  try {
    json = parseJson(text);
  } catch {
    return undefined;
  }
  return findJsonEnum(desc, json, '');
}

function findJsonEnum(desc: DescMessage, json: unknown, path: string): string | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json) || desc.typeName.startsWith('google.protobuf.')) return undefined;
  const obj = json as Record<string, unknown>;
  for (const field of desc.fields) {
    const value = obj[field.jsonName] ?? obj[field.name];
    if (value === undefined || value === null) continue;
    const name = path === '' ? field.name : `${path}.${field.name}`;
    const items = field.fieldKind === 'list' && Array.isArray(value) ? value.map((v, i) => [`${name}[${i}]`, v] as const)
      : field.fieldKind === 'map' && typeof value === 'object' ? Object.entries(value).map(([k, v]) => [`${name}[${k}]`, v] as const)
      : [[name, value] as const];
    const kind = field.fieldKind === 'list' ? field.listKind : field.fieldKind === 'map' ? field.mapKind : field.fieldKind;
    for (const [where, v] of items) {
      if (kind === 'enum' && field.enum && !field.enum.values.some((e) => e.name === v || e.number === v)) return enumRefusal(field.enum, v, where);
      if (kind === 'message' && field.message) {
        const found = findJsonEnum(field.message, v, where);
        if (found) return found;
      }
    }
  }
  return undefined;
}

/** Walks `msg` as `desc` describes it; `path` names the field it sits in (dotted proto names, `[i]` for list items). */
function checkMessage(desc: DescMessage, msg: Record<string, unknown>, path: string): void {
  const unknown = msg.$unknown as readonly { no: number }[] | undefined;
  if (unknown && unknown.length > 0) {
    throw invalidArgument(`${path === '' ? desc.typeName : path}: unknown field number ${unknown[0]!.no}`);
  }
  for (const field of desc.fields) {
    const name = path === '' ? field.name : `${path}.${field.name}`;
    let value: unknown;
    if (field.oneof) {
      const o = msg[field.oneof.localName] as { case: string | undefined; value?: unknown };
      if (o.case !== field.localName) continue;
      value = o.value;
    } else {
      value = msg[field.localName];
    }
    if (value === undefined) continue;
    switch (field.fieldKind) {
      case 'enum':
        checkEnum(field.enum, value, name);
        break;
      case 'message':
        checkMessage(field.message, value as Record<string, unknown>, name);
        break;
      case 'list':
        (value as unknown[]).forEach((item, i) => {
          if (field.listKind === 'enum') checkEnum(field.enum, item, `${name}[${i}]`);
          else if (field.listKind === 'message') checkMessage(field.message, item as Record<string, unknown>, `${name}[${i}]`);
        });
        break;
      case 'map':
        for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
          if (field.mapKind === 'enum') checkEnum(field.enum, item, `${name}[${key}]`);
          else if (field.mapKind === 'message') checkMessage(field.message, item as Record<string, unknown>, `${name}[${key}]`);
        }
        break;
      default:
        break;
    }
  }
}
