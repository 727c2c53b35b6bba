import { toJson, type DescMessage, type JsonValue, type MessageShape } from '@bufbuild/protobuf';
import type { AdminClient } from './createAdminClient.js';
import type { Flags, FlagSpecs } from './parseFlags.js';

/** What a command produced: the response as protobuf JSON for `--json`, and text for people. */
export type CommandOutput = {
  json: JsonValue;
  text: string;
  /** Things the server accepted but that look like mistakes; written to stderr in both modes. */
  warnings?: readonly string[];
};

/** A request checked and ready to send; no I/O happens before it is called. */
export type PreparedCall = (client: AdminClient) => Promise<CommandOutput>;

/** One `paypolicy <group> <action>` subcommand. */
export type Command = {
  group: string;
  action: string;
  /** Flags after `<group> <action>` in usage text, e.g. `--org ORG_ID`. */
  synopsis: string;
  /** One sentence for the usage text. */
  summary: string;
  /** The command's own flags; the global ones are added by the dispatcher. */
  flags: FlagSpecs;
  /** Validates flags and builds the request; throws UsageError before anything is sent. */
  prepare: (flags: Flags) => PreparedCall;
};

/**
 * Pairs a response with its human rendering. Implicit (zero) fields are emitted so scripts reading
 * `--json` always find every key, e.g. an empty `treasuryAddress` before provisioning.
 */
export function commandOutput<D extends DescMessage>(schema: D, message: MessageShape<D>, text: string): CommandOutput {
  return { json: toJson(schema, message, { alwaysEmitImplicit: true }), text };
}
