import type { Command } from './command.js';

const GLOBAL_OPTIONS = `
  --url URL          server (default $PAYPOLICY_URL, else http://127.0.0.1:$PAYPOLICY_PORT, port 8080 when unset)
  --admin-token T    admin token (default $PAYPOLICY_ADMIN_TOKEN, else admin_token in <data dir>/bootstrap.json)
  --data-dir DIR     data directory holding bootstrap.json (default $PAYPOLICY_DATA_DIR, else ./data)
  --json             print the response message as protobuf JSON
  --help             show the usage of a command`;

function commandLine(c: Command): string {
  return `${c.group} ${c.action}${c.synopsis ? ` ${c.synopsis}` : ''}`;
}

/** Usage of a list of commands, in the layout of `paypolicy help`. */
export function formatUsage(commands: readonly Command[]): string {
  const blocks = commands.map((c) => `  ${commandLine(c)}\n      ${c.summary}`);
  return `${blocks.join('\n')}\n\nOptions of every command except serve:${GLOBAL_OPTIONS}`;
}

/** Usage of one command, for `paypolicy <group> <action> --help`. */
export function formatCommandUsage(c: Command): string {
  return `usage: paypolicy ${commandLine(c)}\n\n  ${c.summary}\n\nOptions:${GLOBAL_OPTIONS}`;
}
