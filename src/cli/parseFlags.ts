import { UsageError } from './errors.js';

/** How a flag takes values: `value` once, `list` any number of times, `switch` never. */
export type FlagKind = 'value' | 'list' | 'switch';

/** Flags a command accepts, keyed by their full spelling (`--name`). */
export type FlagSpecs = Readonly<Record<string, FlagKind>>;

/** Parsed command line: accessors that turn absence or misuse into UsageError. */
export type Flags = {
  /** Value of a `value` flag, or undefined when it was not given. */
  get(name: string): string | undefined;
  /** Value of a `value` flag that must be given. */
  require(name: string): string;
  /** Every value of a `list` flag, in command-line order. */
  all(name: string): string[];
  /** Whether a flag was given at all. */
  has(name: string): boolean;
};

/**
 * Quotes a command-line word for an error message. Admin tokens are at least 24 characters; a stray argument that long may be one pasted in the
 * wrong place, so it is described by its length instead of being echoed.
 */
export function describeArgument(arg: string): string {
  return arg.length < 24 ? `"${arg}"` : `of ${arg.length} characters`;
}

/** Parses `--flag value`, `--flag=value` and `--switch` against `specs`; anything else is a UsageError. */
export function parseFlags(argv: readonly string[], specs: FlagSpecs): Flags {
  const values = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf('=');
    const name = arg === '-h' ? '--help' : eq > 0 ? arg.slice(0, eq) : arg;
    if (!name.startsWith('--')) throw new UsageError(`unexpected argument ${describeArgument(arg)}; options start with --`);
    const kind = specs[name];
    if (kind === undefined) throw new UsageError(`unknown option ${name}`);
    let value = '';
    if (kind === 'switch') {
      if (eq > 0) throw new UsageError(`${name} takes no value`);
    } else if (eq > 0) {
      value = arg.slice(eq + 1);
    } else {
      const next = argv[i + 1];
      // A following option means the value was forgotten; `--flag=--x` still passes such a value.
      if (next === undefined || next.startsWith('--')) throw new UsageError(`${name} needs a value`);
      value = next;
      i++;
    }
    const seen = values.get(name);
    if (seen && kind !== 'list') throw new UsageError(`${name} given more than once`);
    values.set(name, [...(seen ?? []), value]);
  }
  const get = (name: string): string | undefined => values.get(name)?.at(-1);
  return {
    get,
    require(name) {
      const value = get(name);
      if (value === undefined) throw new UsageError(`missing required option ${name}`);
      return value;
    },
    all: (name) => values.get(name) ?? [],
    has: (name) => values.has(name),
  };
}
