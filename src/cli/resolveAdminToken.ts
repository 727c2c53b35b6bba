import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UsageError } from './errors.js';
import type { Flags } from './parseFlags.js';

type Env = Record<string, string | undefined>;

/** Same rule as the server's check, so a token the server could never accept fails here without a request. */
const TOKEN = /^[\x21-\x7e]+$/;

/**
 * Reads `admin_token` from the bootstrap file a first start writes. Error messages name the file but
 * never quote its content: a JSON parse error would echo the text around the failure, token included.
 */
function readBootstrapToken(dataDir: string): string {
  const path = join(resolve(dataDir), 'bootstrap.json');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      throw new UsageError(`no admin token: pass --admin-token, set PAYPOLICY_ADMIN_TOKEN, or point --data-dir at the server's data directory (${path} does not exist)`);
    }
    throw new UsageError(`cannot read ${path}: ${code ?? 'unknown error'}`);
  }
  let token: unknown;
  try {
    token = (JSON.parse(text) as { admin_token?: unknown } | null)?.admin_token;
  } catch {
    throw new UsageError(`${path} is not valid JSON`);
  }
  if (typeof token !== 'string' || token === '') throw new UsageError(`${path} has no admin_token`);
  return token;
}

/**
 * The admin token: `--admin-token`, else PAYPOLICY_ADMIN_TOKEN, else `<data dir>/bootstrap.json`
 * where the data dir is `--data-dir`, PAYPOLICY_DATA_DIR or ./data. Never put into any message.
 */
export function resolveAdminToken(flags: Flags, env: Env): string {
  const token = flags.get('--admin-token') ?? (env.PAYPOLICY_ADMIN_TOKEN || readBootstrapToken(flags.get('--data-dir') ?? (env.PAYPOLICY_DATA_DIR || './data')));
  if (!TOKEN.test(token)) throw new UsageError('the admin token must be printable ASCII without spaces');
  return token;
}
