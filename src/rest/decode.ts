import { create, ScalarType, type DescField, type DescMessage, type DescOneof, type Message } from '@bufbuild/protobuf';
import type { ApiKeyPrincipal } from '../domain/types.js';
import { idempotencyKeyOf } from '../domain/paymentRequest.js';
import { holdToMessage, requireIntegerText, usdField } from './body.js';
import type { FieldPlace, RestRoute, RestValues } from './routes.js';

/**
 * Reading a REST request into its RPC's request message, by the route table (routes.ts), in two
 * steps whose order keeps the answers REST gives to a malformed request:
 *
 * 1. readRestValues: the values at their places, as JSON types; an integer field's number must be
 *    written in digits, a oneof member's object may hold only its message's keys, USD numbers are
 *    taken as the digits the client wrote, and a body key and its header must agree.
 * 2. holdRestValues: the route's check (the use case's refusals of what the message cannot hold),
 *    then the message itself.
 */

/** What a request offers beside its body: path parameters, the query (built on demand), headers. */
export type RestSources = {
  params: Record<string, string>;
  readonly url: URL;
  header: (name: string) => string | undefined;
};

type Member = { place: Extract<FieldPlace, { member: unknown }>; field: DescField };

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const membersOf = new WeakMap<RestRoute, Member[]>();

/** The oneof members a route reads from a body object (SignRequest's payload). */
function members(r: RestRoute): Member[] {
  let found = membersOf.get(r);
  if (!found) {
    found = [];
    for (const [name, place] of Object.entries(r.request)) {
      if (place.in === 'body' && 'member' in place) found.push({ place, field: r.rpc.input.fields.find((f) => f.name === name)! });
    }
    membersOf.set(r, found);
  }
  return found;
}

/** The member a body object is read as: the one named by its chooser's REST value, else the default; undefined for a name that is none. */
function chosenMember(r: RestRoute, chooserValue: (key: string) => unknown): Member | undefined {
  const all = members(r);
  if (all.length === 0) return undefined;
  const { chosenBy, otherwise } = all[0]!.place.member;
  const chooser = r.request[chosenBy];
  const value = chooser && chooser.in === 'body' ? chooserValue(chooser.key) : undefined;
  const name = value === undefined ? otherwise : value;
  return all.find((m) => m.field.name === name);
}

/** Step 1: the REST values of a request by REST key. `body` is the parsed JSON object of a POST, else undefined. */
export function readRestValues(r: RestRoute, body: Record<string, unknown> | undefined, sources: RestSources): RestValues {
  const values: RestValues = {};
  if (body) {
    for (const key of Object.keys(body)) {
      const place = r.request[key];
      const field = place && place.in === 'body' && !('member' in place) ? r.rpc.input.fields.find((f) => f.name === key) : undefined;
      if (field) requireIntegerText(body, key, field, '');
    }
    const member = chosenMember(r, (key) => body[key]);
    const raw = member && body[member.place.key];
    if (member && isPlainObject(raw)) {
      holdToMessage(raw, member.field.message!, `${member.place.key}.`, { what: `the ${member.field.name} ${member.place.key}` });
      let held = raw;
      for (const k of member.place.usdText ?? []) {
        if (typeof raw[k] !== 'number') continue;
        if (held === raw) held = Object.assign({}, raw);
        held[k] = usdField(raw, k);
      }
      values[member.place.key] = held;
    }
  }
  for (const [name, place] of Object.entries(r.request)) {
    switch (place.in) {
      case 'body':
        if (!(place.key in values)) values[place.key] = place.usdText === true && body ? usdField(body, place.key) : body?.[place.key];
        break;
      case 'body_or_header':
        values[place.key] = idempotencyKeyOf(body?.[place.key], sources.header(place.header.toLowerCase()));
        break;
      case 'query':
        values[place.names[0]!] = place.names.flatMap((n) => sources.url.searchParams.getAll(n));
        break;
      case 'path':
        values[place.param] = sources.params[place.param];
        break;
      default:
        throw new Error(`${r.path}: ${name} has no place`);
    }
  }
  return values;
}

/** Not representable in the field: the route's check has refused it, or the use case ignores it. */
const UNHELD = Symbol('unheld');
const UINT64_MAX = (1n << 64n) - 1n;

const INT32_RANGE: Partial<Record<ScalarType, readonly [number, number]>> = {
  [ScalarType.UINT32]: [0, 2 ** 32 - 1], [ScalarType.FIXED32]: [0, 2 ** 32 - 1],
  [ScalarType.INT32]: [-(2 ** 31), 2 ** 31 - 1], [ScalarType.SINT32]: [-(2 ** 31), 2 ** 31 - 1], [ScalarType.SFIXED32]: [-(2 ** 31), 2 ** 31 - 1],
};

/** A JSON value as the scalar or enum value of `field`, or UNHELD. */
function holdValue(field: DescField, v: unknown): unknown {
  if (field.fieldKind === 'enum') {
    if (typeof v !== 'string') return UNHELD;
    // REST names an enum value by its suffix in lower case: PAYMENT_TYPE_RAW_TRANSACTION is raw_transaction.
    const value = field.enum.values.find((e) => e.number !== 0 && e.localName.toLowerCase() === v);
    return value ? value.number : UNHELD;
  }
  if (field.fieldKind === 'list' && field.listKind === 'scalar' && field.scalar === ScalarType.STRING) {
    return Array.isArray(v) && v.every((s) => typeof s === 'string') ? v : UNHELD;
  }
  if (field.fieldKind !== 'scalar') return UNHELD;
  switch (field.scalar) {
    case ScalarType.STRING:
      return typeof v === 'string' ? v : UNHELD;
    case ScalarType.BOOL:
      return typeof v === 'boolean' ? v : UNHELD;
    case ScalarType.UINT64:
    case ScalarType.FIXED64: {
      const n = typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : typeof v === 'string' && /^\d+$/.test(v) ? BigInt(v) : undefined;
      return n !== undefined && n <= UINT64_MAX ? n : UNHELD;
    }
    default: {
      const range = INT32_RANGE[field.scalar];
      return range && typeof v === 'number' && Number.isInteger(v) && v >= range[0] && v <= range[1] ? v : UNHELD;
    }
  }
}

/** A message from a JSON object whose keys are its proto field names; what cannot be held stays unset. */
function holdMessage(desc: DescMessage, obj: Record<string, unknown>): Record<string, unknown> {
  const init: Record<string, unknown> = {};
  for (const field of desc.fields) {
    const v = obj[field.name];
    if (v === undefined) continue;
    const held = holdValue(field, v);
    if (held !== UNHELD) init[field.localName] = held;
  }
  return init;
}

/** Step 2: the route's check, then the request message. */
export function holdRestValues(r: RestRoute, values: RestValues, principal: ApiKeyPrincipal): Message {
  r.check?.(values, principal);
  const init: Record<string, unknown> = {};
  const oneofs = new Set<DescOneof>();
  for (const field of r.rpc.input.fields) {
    const place = r.request[field.name]!;
    if (place.in === 'body' && 'member' in place) {
      if (field.oneof) oneofs.add(field.oneof);
      continue;
    }
    const v = values[place.in === 'query' ? place.names[0]! : place.in === 'path' ? place.param : place.key];
    if (v === undefined) continue;
    const held = holdValue(field, v);
    if (held !== UNHELD) init[field.localName] = held;
  }
  if (oneofs.size > 0) {
    const member = chosenMember(r, (key) => values[key]);
    const raw = member && values[member.place.key];
    if (member && isPlainObject(raw)) {
      init[member.field.oneof!.localName] = { case: member.field.localName, value: create(member.field.message!, holdMessage(member.field.message!, raw)) };
    }
  }
  return create(r.rpc.input, init);
}
