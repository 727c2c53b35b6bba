import type { Command } from './command.js';
import { agentCommands } from './commands/agents.js';
import { apiKeyCommands } from './commands/apiKeys.js';
import { approvalCommands } from './commands/approvals.js';
import { organizationCommands } from './commands/organizations.js';
import { serviceCommands } from './commands/services.js';
import { transactionCommands } from './commands/transactions.js';
import { treasuryCommands } from './commands/treasury.js';
import { userCommands } from './commands/users.js';
import { createAdminClient } from './createAdminClient.js';
import { UsageError, reportError } from './errors.js';
import { describeArgument, parseFlags, type FlagSpecs } from './parseFlags.js';
import { clean } from './render.js';
import { resolveAdminToken } from './resolveAdminToken.js';
import { resolveServerUrl } from './resolveServerUrl.js';
import { formatCommandUsage, formatUsage } from './usage.js';

/** Every admin subcommand, in the order `paypolicy help` lists them. */
export const COMMANDS: readonly Command[] = [
  ...organizationCommands,
  ...treasuryCommands,
  ...apiKeyCommands,
  ...agentCommands,
  ...serviceCommands,
  ...transactionCommands,
  ...approvalCommands,
  ...userCommands,
];

const GLOBAL_FLAGS: FlagSpecs = { '--url': 'value', '--admin-token': 'value', '--data-dir': 'value', '--json': 'switch', '--help': 'switch' };

/** Usage of the admin commands, appended by main.ts to the usage of `serve`. */
export const ADMIN_USAGE = formatUsage(COMMANDS);

/** Finds the command; `undefined` means help for the whole group was asked for. */
function findCommand(group: string, action: string | undefined): Command | undefined {
  const commands = COMMANDS.filter((c) => c.group === group);
  if (commands.length === 0) throw new UsageError(`unknown command ${describeArgument(group)}; run "paypolicy help" for the list`);
  if (action === '--help' || action === '-h') return undefined;
  const actions = commands.map((c) => c.action).join(', ');
  if (action === undefined || action.startsWith('-')) throw new UsageError(`${group} needs an action: ${actions}`);
  const command = commands.find((c) => c.action === action);
  if (!command) throw new UsageError(`unknown command ${describeArgument(`${group} ${action}`)}; ${group} actions are ${actions}`);
  return command;
}

/**
 * Runs `paypolicy <group> <action> [flags]` against a running server and returns the exit code:
 * 0 on success, 1 when the server or the connection failed, 2 for a command-line mistake.
 * Flags are checked before the admin token is looked up, so a typo never needs a token.
 */
export async function runAdminCommand(command: string, argv: string[]): Promise<number> {
  let target = 'the server';
  try {
    let [action, ...rest] = argv;
    // Two-word actions (`org limits set`): the longer name wins when it is a command.
    if (action !== undefined && rest[0] !== undefined && COMMANDS.some((c) => c.group === command && c.action === `${action} ${rest[0]}`)) {
      action = `${action} ${rest[0]}`;
      rest = rest.slice(1);
    }
    const found = findCommand(command, action);
    if (!found) {
      process.stdout.write(`usage: paypolicy ${command} <action> [options]\n\n${formatUsage(COMMANDS.filter((c) => c.group === command))}\n`);
      return 0;
    }
    const flags = parseFlags(rest, { ...GLOBAL_FLAGS, ...found.flags });
    if (flags.has('--help')) {
      process.stdout.write(`${formatCommandUsage(found)}\n`);
      return 0;
    }
    const call = found.prepare(flags);
    const server = resolveServerUrl(flags, process.env);
    target = server.displayUrl;
    const output = await call(createAdminClient(server.baseUrl, resolveAdminToken(flags, process.env)));
    process.stdout.write(flags.has('--json') ? `${JSON.stringify(output.json, null, 2)}\n` : `${output.text}\n`);
    for (const warning of output.warnings ?? []) process.stderr.write(`paypolicy: warning: ${clean(warning)}\n`);
    return 0;
  } catch (err) {
    const report = reportError(err, target);
    // Messages may quote user input or server text; clean() keeps the promised single line.
    process.stderr.write(`paypolicy: ${clean(report.line)}\n`);
    return report.exitCode;
  }
}
