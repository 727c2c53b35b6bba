import { parseArgs } from 'node:util';
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

/**
 * Parses `--flag value`, `--flag=value` and `--switch` against `specs` with `node:util` parseArgs;
 * anything else is a UsageError. parseArgs runs non-strict so the checks below keep this CLI's own
 * messages and rules: a value may start with one dash (`--approval-window -5` reaches its validator),
 * a following `--option` means the value was forgotten (`--flag=--x` still passes such a value), and
 * only `list` flags may repeat.
 */
export function parseFlags(argv: readonly string[], specs: FlagSpecs): Flags {
  const options = Object.fromEntries(Object.entries(specs).map(([flag, kind]) => [flag.slice(2), { type: kind === 'switch' ? ('boolean' as const) : ('string' as const) }]));
  const { tokens } = parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true });
  const values = new Map<string, string[]>();
  for (const token of tokens) {
    const arg = argv[token.index]!;
    const name = arg === '-h' ? '--help' : token.kind === 'option' && token.rawName.startsWith('--') ? token.rawName : undefined;
    if (name === undefined) throw new UsageError(`unexpected argument ${describeArgument(arg)}; options start with --`);
    const kind = Object.hasOwn(specs, name) ? specs[name] : undefined;
    if (kind === undefined || token.kind !== 'option') throw new UsageError(`unknown option ${name}`);
    if (kind === 'switch' && token.value !== undefined) throw new UsageError(`${name} takes no value`);
    if (kind !== 'switch' && (token.value === undefined || (!token.inlineValue && token.value.startsWith('--')))) throw new UsageError(`${name} needs a value`);
    const seen = values.get(name);
    if (seen && kind !== 'list') throw new UsageError(`${name} given more than once`);
    values.set(name, [...(seen ?? []), token.value ?? '']);
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
