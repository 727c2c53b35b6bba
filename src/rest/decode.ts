import { create, ScalarType, type DescEnum, type DescField, type Message } from '@bufbuild/protobuf';
import type { ApiKeyPrincipal } from '../domain/types.js';
import { invalidArgument } from '../domain/errors.js';
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
 * 2. holdRestValues: the message itself, and when it cannot carry a value as sent, the route's
 *    check (the use case's refusals of such values).
 */

/** What a request offers beside its body: path parameters, the query (built on demand), headers. */
export type RestSources = {
  params: Record<string, string>;
  /** Whether the request target has a query string (the URL is then worth building). */
  hasQuery: boolean;
  readonly url: URL;
  header: (name: string) => string | undefined;
};

type Member = { place: Extract<FieldPlace, { member: unknown }>; field: DescField };

/** A route's table compiled once: each field with its place, the body keys' fields, the oneof members. */
type Plan = {
  entries: { field: DescField; place: FieldPlace; key: string }[];
  /** The scalar field read from each body key (the integer-text check is by key). */
  bodyFields: Map<string, DescField>;
  /** The query parameters the route reads; any other is refused. */
  queryNames: Set<string>;
  members: Member[];
  /** The body key of the members' chooser (`type`), and the member read when it is unset. */
  chooserKey: string | undefined;
  otherwise: string | undefined;
};

const plans = new WeakMap<RestRoute, Plan>();

/** The REST key a place's value is kept under in RestValues. */
function restKey(place: FieldPlace): string {
  return place.in === 'query' ? place.names[0]! : place.in === 'path' ? place.param : place.key;
}

function planOf(r: RestRoute): Plan {
  let plan = plans.get(r);
  if (plan) return plan;
  plan = { entries: [], bodyFields: new Map(), queryNames: new Set(), members: [], chooserKey: undefined, otherwise: undefined };
  for (const [name, place] of Object.entries(r.request)) {
    const field = r.rpc.input.fields.find((f) => f.name === name);
    if (!field) throw new Error(`${r.method} ${r.path}: ${r.rpc.input.typeName} has no field ${name}`);
    if (place.in === 'body' && 'member' in place) {
      plan.members.push({ place, field });
      const chooser = r.request[place.member.chosenBy];
      plan.chooserKey = chooser && chooser.in === 'body' ? chooser.key : undefined;
      plan.otherwise = place.member.otherwise;
      continue;
    }
    if (place.in === 'body') plan.bodyFields.set(place.key, field);
    if (place.in === 'query') for (const n of place.names) plan.queryNames.add(n);
    plan.entries.push({ field, place, key: restKey(place) });
  }
  plans.set(r, plan);
  return plan;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The member a body object is read as: the one named by its chooser's REST value, else the default; undefined for a name that is none. */
function chosenMember(plan: Plan, chooser: unknown): Member | undefined {
  if (plan.members.length === 0) return undefined;
  const name = chooser === undefined ? plan.otherwise : chooser;
  return plan.members.find((m) => m.field.name === name);
}

/** Step 1: the REST values of a request by REST key. `body` is the parsed JSON object of a POST, else undefined. */
export function readRestValues(r: RestRoute, body: Record<string, unknown> | undefined, sources: RestSources): RestValues {
  const plan = planOf(r);
  if (sources.hasQuery) {
    for (const name of sources.url.searchParams.keys()) {
      if (plan.queryNames.has(name)) continue;
      const takes = plan.queryNames.size === 0 ? 'none' : [...plan.queryNames].join(', ');
      throw invalidArgument(`Unknown query parameter "${name.length > 100 ? `${name.slice(0, 100)}…` : name}" (this endpoint takes ${takes})`);
    }
  }
  const values: RestValues = {};
  if (body) {
    for (const key of Object.keys(body)) {
      const field = plan.bodyFields.get(key);
      if (field) requireIntegerText(body, key, field, '');
    }
    const member = chosenMember(plan, plan.chooserKey === undefined ? undefined : body[plan.chooserKey]);
    if (member) {
      const raw = body[member.place.key];
      values[member.place.key] = raw;
      if (isPlainObject(raw)) {
        holdToMessage(raw, member.field.message!, `${member.place.key}.`, { what: `the ${member.field.name} ${member.place.key}` });
        for (const k of member.place.usdText ?? []) {
          if (typeof raw[k] !== 'number') continue;
          const held = values[member.place.key] === raw ? Object.assign({}, raw) : (values[member.place.key] as Record<string, unknown>);
          held[k] = usdField(raw, k);
          values[member.place.key] = held;
        }
      }
    } else if (plan.members.length > 0) {
      values[plan.members[0]!.place.key] = body[plan.members[0]!.place.key];
    }
  }
  for (const { place, key } of plan.entries) {
    switch (place.in) {
      case 'body':
        values[key] = place.usdText === true && body ? usdField(body, key) : body?.[key];
        break;
      case 'body_or_header':
        values[key] = idempotencyKeyOf(body?.[key], sources.header(place.header.toLowerCase()));
        break;
      case 'query':
        values[key] = place.names.flatMap((n) => sources.url.searchParams.getAll(n));
        break;
      case 'path':
        values[key] = sources.params[key];
        break;
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

const enumNumbers = new WeakMap<DescEnum, Map<string, number>>();

/** An enum's values by their REST names, the suffix in lower case (PAYMENT_TYPE_RAW_TRANSACTION is raw_transaction); UNSPECIFIED has none. */
function restEnumNumbers(desc: DescEnum): Map<string, number> {
  let numbers = enumNumbers.get(desc);
  if (!numbers) {
    numbers = new Map(desc.values.filter((e) => e.number !== 0).map((e) => [e.localName.toLowerCase(), e.number]));
    enumNumbers.set(desc, numbers);
  }
  return numbers;
}

/** A JSON value as the scalar or enum value of `field`, or UNHELD. */
function holdValue(field: DescField, v: unknown): unknown {
  if (field.fieldKind === 'enum') {
    if (typeof v !== 'string') return UNHELD;
    return restEnumNumbers(field.enum).get(v) ?? UNHELD;
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

/**
 * Holds `v` in `field` of `init`: `held`, `empty` when held as an empty string, which proto3 cannot
 * tell from a field left out while the use case may (an empty payload.method is refused, not taken
 * for GET), or `unheld` when the message cannot carry it at all.
 */
function holdInto(init: Record<string, unknown>, field: DescField, v: unknown): 'held' | 'empty' | 'unheld' {
  const held = holdValue(field, v);
  if (held === UNHELD) return 'unheld';
  init[field.localName] = held;
  return held === '' ? 'empty' : 'held';
}

/** The JSON value as an error names it: `null`, a type for anything structured, the literal otherwise. */
function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  return typeof v === 'string' ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v) : String(v);
}

/**
 * Step 2: the request message. When some value could not be carried exactly, the route's check
 * runs first on the values as sent, so such a request is refused as the use case refuses it; a
 * value it lets through is one the use case ignores, and stays unset. Holding is pure, so running
 * the check only then answers every request as running it always would.
 */
export function holdRestValues(r: RestRoute, values: RestValues, principal: ApiKeyPrincipal): Message {
  const plan = planOf(r);
  const init: Record<string, unknown> = {};
  let exact = true;
  // The first value the message cannot carry at all: refused naming it if the check lets it
  // through, so no value is dropped unseen (even one the use case ignores, such as an x402
  // request's recipient_address).
  let unheld: { name: string; value: unknown } | undefined;
  for (const { field, key } of plan.entries) {
    const v = values[key];
    if (v === undefined) continue;
    const how = holdInto(init, field, v);
    if (how !== 'held') exact = false;
    if (how === 'unheld') unheld ??= { name: key, value: v };
  }
  if (plan.members.length > 0) {
    const member = chosenMember(plan, plan.chooserKey === undefined ? undefined : values[plan.chooserKey]);
    const raw = values[plan.members[0]!.place.key];
    if (member && isPlainObject(raw)) {
      const desc = member.field.message!;
      const payload: Record<string, unknown> = {};
      for (const field of desc.fields) {
        const v = raw[field.name];
        if (v === undefined) continue;
        const how = holdInto(payload, field, v);
        if (how !== 'held') exact = false;
        if (how === 'unheld') unheld ??= { name: `${plan.members[0]!.place.key}.${field.name}`, value: v };
      }
      init[member.field.oneof!.localName] = { case: member.field.localName, value: create(desc, payload) };
    } else if (raw !== undefined) {
      exact = false;
      unheld ??= { name: plan.members[0]!.place.key, value: raw };
    }
  }
  if (!exact) r.check?.(values, principal);
  if (unheld) throw invalidArgument(`${unheld.name}: ${describeValue(unheld.value)} is not a value this field takes`);
  return create(r.rpc.input, init);
}
