import { timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createApiKey } from './app/accounts/apiKeys.js';
import { createAgent } from './app/organizations/agents.js';
import type { AppDeps } from './app/deps.js';
import { createOrganization, provisionTreasury } from './app/organizations/organizations.js';
import { generateAdminToken, hashSecret } from './app/accounts/auth/credentials.js';
import { OPERATOR } from './domain/types.js';
import { MICROS_PER_USD } from './domain/money.js';
import { DEFAULT_MAX_NETWORK_FEE_WEI } from './domain/networkFee.js';
import { withinWrite } from './app/withinWrite.js';
import { writePrivateFile } from './store/dataDir.js';

/** The file a first start writes (mode 0600), with exactly these keys. */
export type BootstrapFile = {
  admin_token: string;
  org_id: string;
  api_key: string;
  agent_id: string;
  treasury_address: string;
};

const BOOTSTRAPPED = 'bootstrapped_at';
const ADMIN_TOKEN_HASH = 'admin_token_hash';
/** 'pending' from the first start until a server has printed the first-start banner. */
const BANNER = 'bootstrap_banner';

/** The demo agent's policy: small amounts only, nothing without an allowlist entry. */
const DEMO_POLICY = { spendCapMicros: 10n * MICROS_PER_USD, approvalThresholdMicros: 1n * MICROS_PER_USD, maxNetworkFeeWei: DEFAULT_MAX_NETWORK_FEE_WEI, maxPerPaymentMicros: null };

/**
 * On an empty database, creates what a new operator needs to try the service: an admin token
 * (unless PAYPOLICY_ADMIN_TOKEN is set), a `default` organization with a treasury, a test API
 * key and a demo agent. Returns the secrets once for printing; later starts return undefined.
 */
export async function bootstrapIfEmpty(deps: AppDeps, dataDir: string, envAdminToken: string | undefined): Promise<BootstrapFile | undefined> {
  if (await deps.store.settings.get(BOOTSTRAPPED) !== undefined) return undefined;
  const adminToken = envAdminToken ?? generateAdminToken();
  // One transaction (the use cases' own writes join it, withinWrite.ts) that also writes the
  // file: if anything fails, nothing is committed and the next start bootstraps again.
  return deps.uow.write(async (tx) => {
    const inTx = withinWrite(deps, tx);
    const { settings } = tx;
    const org = await createOrganization(inTx, OPERATOR, { name: 'default' });
    const treasuryAddress = await provisionTreasury(inTx, OPERATOR, org.id);
    const key = await createApiKey(inTx, OPERATOR, { orgId: org.id, mode: 'test', label: 'bootstrap' });
    const now = deps.now();
    const agent = await createAgent(inTx, OPERATOR, {
      orgId: org.id,
      name: 'demo-agent',
      policy: { allowlist: [], ...DEMO_POLICY, limits: [], updatedAt: now },
    });
    const file: BootstrapFile = { admin_token: adminToken, org_id: org.id, api_key: key.plaintext, agent_id: agent.id, treasury_address: treasuryAddress };
    await settings.set(ADMIN_TOKEN_HASH, hashSecret(adminToken).toString('hex'));
    await settings.set(BOOTSTRAPPED, String(now));
    await settings.set(BANNER, 'pending');
    const path = join(dataDir, 'bootstrap.json');
    writePrivateFile(path, `${JSON.stringify(file, null, 2)}\n`);
    return file;
  }, { alone: true });
}

/**
 * The first start's secrets again, when no server has printed them yet: a first start that
 * bootstrapped and then could not listen (its port taken) shows the banner at the next start
 * instead. Read from bootstrap.json; undefined once shown, or when the file is gone or unreadable.
 */
export async function unshownBootstrap(deps: AppDeps, dataDir: string): Promise<BootstrapFile | undefined> {
  if (await deps.store.settings.get(BANNER) !== 'pending') return undefined;
  try {
    const file = JSON.parse(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')) as Partial<BootstrapFile>;
    const fields = [file.admin_token, file.org_id, file.api_key, file.agent_id, file.treasury_address];
    return fields.every((f) => typeof f === 'string') ? file as BootstrapFile : undefined;
  } catch {
    return undefined;
  }
}

/** Records that the first-start banner went out, so no later start prints the secrets again. */
export async function markBannerShown(deps: AppDeps): Promise<void> {
  await deps.uow.write(async (tx) => { await tx.settings.set(BANNER, 'shown'); });
}

/** The admin token hash in force: the environment's token when set, else the stored one. */
export async function adminTokenHash(deps: AppDeps, envAdminToken: string | undefined): Promise<Buffer> {
  if (envAdminToken) return hashSecret(envAdminToken);
  const stored = await deps.store.settings.get(ADMIN_TOKEN_HASH);
  if (!stored) throw new Error('no admin token: set PAYPOLICY_ADMIN_TOKEN or start once on an empty data directory');
  return Buffer.from(stored, 'hex');
}

/**
 * Which admin token a server accepts, for its start-up line (never the token itself): the
 * environment's when PAYPOLICY_ADMIN_TOKEN is set, and then the admin_token that bootstrap.json
 * holds (the one stored at the first start) only when it is the same token.
 */
export async function adminTokenNotice(deps: AppDeps, envAdminToken: string | undefined): Promise<string> {
  const file = 'bootstrap.json in the data directory';
  if (!envAdminToken) return `admin token and test key: see ${file}`;
  const stored = await deps.store.settings.get(ADMIN_TOKEN_HASH);
  const same = stored !== undefined && timingSafeEqual(hashSecret(envAdminToken), Buffer.from(stored, 'hex'));
  return same
    ? `admin token: PAYPOLICY_ADMIN_TOKEN, the same as in ${file}; test key: see that file`
    : `admin token: PAYPOLICY_ADMIN_TOKEN; the admin_token in ${file} is refused while it is set; test key: see that file`;
}

/**
 * Human-readable first-start banner. Printed to stdout once; never sent to the logger. `cli` is
 * how the operator runs the admin CLI: the launcher's path in a checkout (`./bin/paypolicy.js`), the executable's path otherwise.
 */
export function bootstrapBanner(file: BootstrapFile, url: string, dataDir: string, cli = './bin/paypolicy.js'): string {
  // The CLI is told where this server is and where its data lives, so on another port or data
  // directory it does not talk to whatever answers on the default one.
  const cliTarget = ` --url ${url}${resolve(dataDir) === resolve('data') ? '' : ` --data-dir ${dataDir}`}`;
  return [
    '',
    'paypolicy: first start, created a default organization:',
    `  admin token       ${file.admin_token}`,
    `  organization      ${file.org_id}`,
    `  test API key      ${file.api_key}`,
    `  demo agent        ${file.agent_id}  (cap $10 per 24h, approval above $1, empty allowlist)`,
    `  treasury address  ${file.treasury_address}`,
    `  saved to          ${join(dataDir, 'bootstrap.json')} (mode 0600); shown only this once`,
    '',
    'Try it:',
    `  curl -s -X POST ${url}/api/ping -H 'Authorization: Bearer ${file.api_key}' \\`,
    `       -H 'Content-Type: application/json' -d '{"agent_id":"${file.agent_id}"}'`,
    `  curl -s '${url}/api/resolve?slug=example' -H 'Authorization: Bearer ${file.api_key}'`,
    `  ${cli} agent list --org ${file.org_id}${cliTarget}     (admin CLI; reads the token from bootstrap.json)`,
    '',
    `Dashboard: ${url}/dashboard — create its first owner (the password is read from stdin):`,
    `  ${cli} user create --org ${file.org_id}${cliTarget} --email you@example.com --role owner --password-stdin`,
    '',
  ].join('\n');
}
