import { fromJson, ScalarType, type DescField, type DescMessage, type JsonObject, type MessageShape } from '@bufbuild/protobuf';
import { FeatureSet_FieldPresence } from '@bufbuild/protobuf/wkt';
import type { Flags, FlagSpecs } from './parseFlags.js';
import { UsageError } from './errors.js';

/**
 * Flags read from a request message's descriptor, so a field added to the proto is a CLI option
 * without a CLI edit: every field becomes `--<field-name-in-kebab-case>` (or the name given in
 * `names`), a repeated field a repeatable, comma-separated list, and a field without explicit
 * presence is required (a request that replaces a record whole must state each part of it). The
 * values go through protobuf's JSON reading, so they are checked as the field's type.
 */

/** How one field is offered: its flag and the placeholder shown in the usage text. */
export type FlagName = { flag: string; placeholder: string };

export type MessageFlags<D extends DescMessage> = {
  flags: FlagSpecs;
  /** The usage synopsis of these flags, optional ones in brackets. */
  synopsis: string;
  /** The request message from the flags; `fixed` sets fields the command fills itself. */
  read: (flags: Flags, fixed?: JsonObject) => MessageShape<D>;
};

const kebab = (name: string) => name.replace(/_/g, '-');

function defaultName(field: DescField): FlagName {
  return { flag: `--${kebab(field.name)}`, placeholder: field.name.toUpperCase() };
}

/** A field whose absence the message can tell from its zero value (proto3 `optional`, a message). */
function optional(field: DescField): boolean {
  return field.fieldKind === 'message' || (field.fieldKind !== 'list' && field.fieldKind !== 'map' && field.presence !== FeatureSet_FieldPresence.IMPLICIT);
}

/** One flag's text as the JSON value protobuf reads for the field. */
function jsonValue(field: DescField, text: string): string | number | boolean {
  const scalar = field.fieldKind === 'scalar' || field.fieldKind === 'list' ? field.scalar : undefined;
  if (scalar === ScalarType.BOOL) {
    if (text !== 'true' && text !== 'false') throw new UsageError(`--${kebab(field.name)} takes true or false, not ${JSON.stringify(text)}`);
    return text === 'true';
  }
  if (scalar === ScalarType.DOUBLE || scalar === ScalarType.FLOAT || scalar === ScalarType.INT32 || scalar === ScalarType.UINT32 || scalar === ScalarType.SINT32 || scalar === ScalarType.FIXED32 || scalar === ScalarType.SFIXED32) {
    const n = Number(text);
    if (text.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${kebab(field.name)} takes a number, not ${JSON.stringify(text)}`);
    return n;
  }
  return text;
}

/**
 * The flags of `schema` except the fields in `skip` (filled by the command). Only scalar, enum and
 * repeated scalar fields can be flags; a message field in the request is refused here, at start-up
 * of the CLI's tests, rather than silently left out.
 */
export function messageFlags<D extends DescMessage>(schema: D, names: Readonly<Record<string, FlagName>>, skip: readonly string[] = []): MessageFlags<D> {
  const fields = schema.fields.filter((f) => !skip.includes(f.name));
  for (const f of fields) {
    if (f.fieldKind === 'message' || f.fieldKind === 'map' || (f.fieldKind === 'list' && f.listKind !== 'scalar')) {
      throw new Error(`${schema.typeName}.${f.name} cannot be a command-line flag`);
    }
  }
  const named = fields.map((f) => ({ field: f, ...(names[f.name] ?? defaultName(f)) }));
  const flags: Record<string, 'value' | 'list'> = {};
  for (const n of named) flags[n.flag] = n.field.fieldKind === 'list' ? 'list' : 'value';
  const synopsis = named
    .map((n) => {
      const text = `${n.flag} ${n.placeholder}`;
      return optional(n.field) ? `[${text}]` : text;
    })
    .join(' ');
  return {
    flags,
    synopsis,
    read(given, fixed = {}) {
      const json: JsonObject = { ...fixed };
      for (const { field, flag } of named) {
        if (field.fieldKind === 'list') {
          // Stated even when empty (`--allow ''`): the request replaces the list whole.
          if (!given.has(flag)) throw new UsageError(`missing required option ${flag} (use ${flag} '' for none)`);
          json[field.jsonName] = given.all(flag).flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v !== '').map((v) => jsonValue(field, v));
        } else if (given.has(flag)) {
          json[field.jsonName] = jsonValue(field, given.get(flag)!);
        } else if (!optional(field)) {
          given.require(flag);
        }
      }
      try {
        return fromJson(schema, json);
      } catch (err) {
        throw new UsageError(err instanceof Error ? err.message : String(err));
      }
    },
  };
}
