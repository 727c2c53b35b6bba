import { describe, expect, test } from 'vitest';
import { UsageError } from '../../src/cli/errors.js';
import { parseFlags, type FlagSpecs } from '../../src/cli/parseFlags.js';
import { ConfigError, SERVE_FLAGS, loadConfig } from '../../src/config.js';
import { runCliInProcess as runCli } from '../helpers/cliInProcess.js';

/**
 * Both flag parsers (the admin commands' and `serve`'s) sit on node:util parseArgs; these pin the
 * rules and messages of this CLI that parseArgs alone would not give.
 */
const SPECS: FlagSpecs = { '--name': 'value', '--allow': 'list', '--json': 'switch', '--help': 'switch' };

function parsed(argv: string[]) {
  const f = parseFlags(argv, SPECS);
  return { name: f.get('--name'), allow: f.all('--allow'), json: f.has('--json'), help: f.has('--help') };
}

describe('parseFlags', () => {
  test('behavior: spaced and inline values, repeated list flags in order, switches, -h for --help', () => {
    expect(parsed(['--name', 'a', '--allow', 'x', '--allow=', '--allow', 'y', '--json', '-h'])).toEqual({ name: 'a', allow: ['x', '', 'y'], json: true, help: true });
    expect(parsed([])).toEqual({ name: undefined, allow: [], json: false, help: false });
  });

  test('behavior: a value may start with one dash, and --flag=--x passes a value that looks like an option', () => {
    expect(parsed(['--name', '-5']).name).toBe('-5');
    expect(parsed(['--name', '-']).name).toBe('-');
    expect(parsed(['--name=--x']).name).toBe('--x');
  });

  test.each([
    [['--name'], '--name needs a value'],
    [['--name', '--json'], '--name needs a value'],
    [['--name', 'a', '--name', 'b'], '--name given more than once'],
    [['--json=1'], '--json takes no value'],
    [['--colour=red'], 'unknown option --colour'],
    [['--constructor'], 'unknown option --constructor'],
    [['extra'], 'unexpected argument "extra"; options start with --'],
    [['-hx'], 'unexpected argument "-hx"; options start with --'],
    [['-x'], 'unexpected argument "-x"; options start with --'],
    [['--', 'x'], 'unexpected argument "--"; options start with --'],
    [['x'.repeat(40)], 'unexpected argument of 40 characters; options start with --'],
  ])('error: %j is refused with "%s"', (argv, message) => {
    expect(() => parsed(argv)).toThrow(new UsageError(message));
  });

  test('error: -h is --help, so it is unknown where --help is not a flag', () => {
    expect(() => parseFlags(['-h'], { '--name': 'value' })).toThrow(new UsageError('unknown option --help'));
  });
});

describe('serve flags (loadConfig)', () => {
  test('behavior: a repeated value flag keeps its last value; switches and inline values work', () => {
    const c = loadConfig(['--port', '1', '--port=2', '--dev', '--skip-integrity-check', '--host', '::1'], { PAYPOLICY_PORT: '3' });
    expect(c).toMatchObject({ port: 2, dev: true, skipIntegrityCheck: true, host: '::1' });
  });

  test('behavior: an empty environment variable counts as unset; a flag wins over its variable', () => {
    expect(loadConfig([], { PAYPOLICY_PORT: '', PAYPOLICY_HOST: '0.0.0.0' })).toMatchObject({ port: 8080, host: '0.0.0.0' });
    expect(loadConfig(['--host', '127.0.0.2'], { PAYPOLICY_HOST: '0.0.0.0' }).host).toBe('127.0.0.2');
  });

  test.each([
    [['--verbose'], 'unknown option --verbose'],
    [['--port'], '--port needs a value'],
    [['--port', '--host', 'x'], '--port needs a value'],
    [['--dev=1'], '--dev takes no value'],
    [['8080'], 'unexpected argument "8080"; options start with --'],
    [['--port', '-1'], '--port must be an integer from 0 to 65535, got "-1"'],
  ])('error: serve %j is a ConfigError "%s"', (argv, message) => {
    expect(() => loadConfig(argv, {})).toThrow(new ConfigError(message));
  });

  test('behavior: `paypolicy help` names every serve flag', async () => {
    const r = await runCli(['help']);
    expect(r.code).toBe(0);
    const missing = Object.keys(SERVE_FLAGS).filter((flag) => !new RegExp(`[[ ]${flag}[ \\]]`).test(r.stdout));
    expect(missing).toEqual([]);
  });
});
