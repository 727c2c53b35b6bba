import {
  CreateDashboardUserResponseSchema,
  DashboardRole,
  DeleteDashboardUserResponseSchema,
  ListDashboardUsersResponseSchema,
  ResetDashboardUserPasswordResponseSchema,
  UpdateDashboardUserResponseSchema,
  type DashboardUser,
} from '../../../gen/paypolicy/v1/admin_pb.js';
import { commandOutput, type Command } from '../command.js';
import { UsageError } from '../errors.js';
import { requireChoice } from '../flagValues.js';
import type { Flags } from '../parseFlags.js';
import { formatFields, formatList, formatTime } from '../render.js';
import { allPages } from './pages.js';

const ROLES = { owner: DashboardRole.OWNER, approver: DashboardRole.APPROVER, viewer: DashboardRole.VIEWER } as const;

/** The environment variable scripts may use instead of stdin. */
export const PASSWORD_ENV = 'PAYPOLICY_DASHBOARD_PASSWORD';

/** Longest stdin accepted; a password is far shorter, and a pipe mistake should not fill memory. */
const MAX_STDIN_BYTES = 16 * 1024;

function roleName(role: DashboardRole): string {
  return Object.entries(ROLES).find(([, v]) => v === role)?.[0] ?? 'unspecified';
}

function userFields(u: DashboardUser | undefined): string {
  if (!u) return 'no user in the response';
  return formatFields([
    ['id', u.id],
    ['organization', u.orgId],
    ['email', u.email],
    ['role', roleName(u.role)],
    ['status', u.disabled ? 'disabled' : 'enabled'],
    ['created', formatTime(u.createdAt)],
  ]);
}

/** The new password from stdin (typed or piped) or the environment; never from the command line. */
function passwordSource(flags: Flags): () => Promise<string> {
  const fromStdin = flags.has('--password-stdin');
  const fromEnv = process.env[PASSWORD_ENV];
  if (!fromStdin && fromEnv === undefined) throw new UsageError(`give the password on stdin with --password-stdin, or in ${PASSWORD_ENV}`);
  return async () => {
    let password = fromEnv ?? '';
    if (fromStdin) password = process.stdin.isTTY ? await promptPassword(process.stdin, process.stderr) : await readPipedPassword(process.stdin);
    if (password === '') throw new UsageError('the password is empty');
    return password;
  };
}

/** `user disable` and `user enable`: the same RPC with the state to set. */
function statusCommand(action: 'disable' | 'enable'): Command {
  const disabled = action === 'disable';
  return {
    group: 'user',
    action,
    synopsis: '--id USER_ID',
    summary: disabled
      ? 'Disable a dashboard user: their sessions end at once and they cannot sign in (the last enabled owner cannot be disabled).'
      : 'Enable a disabled dashboard user again; they sign in with their existing password.',
    flags: { '--id': 'value' },
    prepare(flags) {
      const request = { userId: flags.require('--id'), disabled };
      return async (client) => {
        const r = await client.updateDashboardUser(request);
        return commandOutput(UpdateDashboardUserResponseSchema, r, userFields(r.user));
      };
    },
  };
}

/** A piped password: everything on stdin without one trailing newline (what `echo` and files add). */
async function readPipedPassword(stdin: NodeJS.ReadStream): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_STDIN_BYTES) throw new UsageError('stdin is too long to be a password');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
}

/**
 * A typed password: the terminal is put in raw mode so nothing is echoed, and the prompt goes to
 * stderr so stdout stays clean for --json.
 */
function promptPassword(stdin: NodeJS.ReadStream, stderr: NodeJS.WriteStream): Promise<string> {
  return new Promise((resolve, reject) => {
    stderr.write('Dashboard password: ');
    let typed = '';
    const finish = (err?: Error) => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      stderr.write('\n');
      if (err) reject(err);
      else resolve(typed);
    };
    const onData = (data: Buffer) => {
      for (const ch of data.toString('utf8')) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return finish();
        if (ch === '\u0003') return finish(new UsageError('cancelled'));
        if (ch === '\u007f' || ch === '\b') typed = [...typed].slice(0, -1).join('');
        else typed += ch;
      }
    };
    stdin.setRawMode(true);
    stdin.resume();
    stdin.on('data', onData);
  });
}

/** `user create|list|disable|enable|remove|reset-password`: the people who use an organization's dashboard. */
export const userCommands: Command[] = [
  {
    group: 'user',
    action: 'create',
    synopsis: '--org ORG_ID --email EMAIL --role owner|approver|viewer --password-stdin',
    summary: `Add a dashboard user; the password (12 characters or more) is read from stdin, or from $${PASSWORD_ENV}, never from the command line.`,
    flags: { '--org': 'value', '--email': 'value', '--role': 'value', '--password-stdin': 'switch' },
    prepare(flags) {
      const orgId = flags.require('--org');
      const email = flags.require('--email');
      const role = ROLES[requireChoice(flags, '--role', ['owner', 'approver', 'viewer'])];
      const readPassword = passwordSource(flags);
      return async (client) => {
        const password = await readPassword();
        const r = await client.createDashboardUser({ orgId, email, role, password });
        return commandOutput(CreateDashboardUserResponseSchema, r, userFields(r.user));
      };
    },
  },
  {
    group: 'user',
    action: 'list',
    synopsis: '--org ORG_ID',
    summary: "List an organization's dashboard users, oldest first.",
    flags: { '--org': 'value' },
    prepare(flags) {
      const request = { orgId: flags.require('--org') };
      return async (client) => {
        const r = await allPages((page) => client.listDashboardUsers({ ...request, ...page }), (x) => x.users);
        const rows = r.users.map((u) => [u.id, u.email, roleName(u.role), u.disabled ? 'disabled' : 'enabled', formatTime(u.createdAt)]);
        return commandOutput(ListDashboardUsersResponseSchema, r, formatList('dashboard users', ['ID', 'EMAIL', 'ROLE', 'STATUS', 'CREATED'], rows));
      };
    },
  },
  statusCommand('disable'),
  statusCommand('enable'),
  {
    group: 'user',
    action: 'remove',
    synopsis: '--id USER_ID',
    summary: 'Remove a dashboard user and end their sessions (the last enabled owner cannot be removed).',
    flags: { '--id': 'value' },
    prepare(flags) {
      const request = { userId: flags.require('--id') };
      return async (client) => {
        const r = await client.deleteDashboardUser(request);
        return commandOutput(DeleteDashboardUserResponseSchema, r, `removed ${request.userId}`);
      };
    },
  },
  {
    group: 'user',
    action: 'reset-password',
    synopsis: '--id USER_ID --password-stdin',
    summary: `Set a new password (from stdin or $${PASSWORD_ENV}) and end every session of the user.`,
    flags: { '--id': 'value', '--password-stdin': 'switch' },
    prepare(flags) {
      const userId = flags.require('--id');
      const readPassword = passwordSource(flags);
      return async (client) => {
        const password = await readPassword();
        const r = await client.resetDashboardUserPassword({ userId, password });
        return commandOutput(ResetDashboardUserPasswordResponseSchema, r, `password reset; sessions ended\n${userFields(r.user)}`);
      };
    },
  },
];
