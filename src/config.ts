import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { UsageError } from './cli/errors.js';
import { parseFlags, type Flags, type FlagSpecs } from './cli/parseFlags.js';
import { LOG_LEVELS, type LogLevel } from './observability/logger.js';
import { validateAdminToken } from './app/accounts/auth/credentials.js';
import { DEFAULT_MAX_QUEUE_MS } from './overload/admission.js';

/** Everything the service reads from its environment, validated once at start-up. */
export type Config = {
  port: number;
  host: string;
  dataDir: string;
  logLevel: LogLevel;
  adminToken: string | undefined;
  masterKey: string | undefined;
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  /** Signing worker threads; default one fewer than the cores (at least 1, at most 4). */
  signerThreads: number;
  /** Development mode: quote and sign may probe http:// URLs. */
  dev: boolean;
  /** Test-only `host:port` entries exempt from the probe's private-address block. */
  probeAllowHosts: string[];
  /**
   * JSON-RPC endpoint of a Tempo node for MPP gas and fee estimates; defaults when unset. An alias
   * kept for existing deployments: an --rpc-url entry for the offer's Tempo chain takes precedence.
   */
  tempoRpcUrl: string | undefined;
  /** JSON-RPC endpoint per EVM chain id: raw transactions for these chains are broadcast there. Unset: signed, never submitted. */
  rpcUrls?: ReadonlyMap<number, string>;
  /** Blocks (the mining one included) before a submitted raw transaction counts as confirmed (default 1). */
  confirmations?: number;
  /** A submitted raw transaction not mined after this (ms) is replaced by a fee bump within the policy's ceiling (default 60 s). */
  replaceAfterMs?: number;
  /** Open client connections beyond which new ones are refused; default from the open-file limit (at most 4096). */
  maxConnections?: number;
  /** An HTTP/2 session with no open stream is closed after this (default 60 s). */
  idleTimeoutMs?: number;
  /** A request's headers and body must arrive within this (default 30 s), HTTP/1.1 and HTTP/2 alike. */
  requestTimeoutMs?: number;
  /** Requests in flight on REST /api/* and PaymentPolicyService beyond which new ones get 503 overloaded (default 128). */
  maxInFlight?: number;
  maxInFlightPerOrg?: number;
  /** Payments in the signing stage beyond which a new payment is refused before anything is written (default 256). */
  maxSignQueue?: number;
  /** The part of maxSignQueue one organization may hold (default three quarters, overload/admission.ts tenantShare). */
  maxSignQueuePerOrg?: number;
  /** A payment that waited longer than this (ms) in the signing stage is refused before its decision is written (default 1000). */
  maxQueueMs?: number;
  /** Outbound paywall probes in flight beyond which a new one is refused (default 32). */
  maxProbes?: number;
  /** The part of maxProbes one organization may hold (default three quarters, overload/admission.ts tenantShare). */
  maxProbesPerOrg?: number;
  /** Skip the database's integrity check at start (for operators who run it offline). */
  skipIntegrityCheck?: boolean;
  /** Bearer token that guards /metrics; unset: /metrics answers loopback clients only. */
  metricsToken?: string;
  /** Label sign outcomes with agent ids too (a separate series; unbounded, so opt-in). */
  metricsAgentLabels?: boolean;
  /** postgres://… : the shared PostgreSQL store (several replicas); unset: SQLite in the data directory. */
  databaseUrl?: string;
  /** Connections in this process's PostgreSQL pool (default 10). */
  databasePoolSize?: number;
  /** PostgreSQL statement_timeout of every statement, ms (default 5000); also bounds lock waits. */
  databaseStatementTimeoutMs?: number;
  /** PostgreSQL: a row in `signing` untouched this long belongs to no live replica and is repaired (default 60 s). */
  staleSigningMs?: number;
  /** SQLite: the WAL size (MiB) at which writes pause for a moment so it can start over (store.ts). */
  walRestartMb?: number;
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

const FLAGS: Record<string, { env: string; key: keyof Config }> = {
  '--port': { env: 'PAYPOLICY_PORT', key: 'port' },
  '--host': { env: 'PAYPOLICY_HOST', key: 'host' },
  '--data-dir': { env: 'PAYPOLICY_DATA_DIR', key: 'dataDir' },
  '--log-level': { env: 'PAYPOLICY_LOG_LEVEL', key: 'logLevel' },
  '--tls-cert': { env: 'PAYPOLICY_TLS_CERT', key: 'tlsCert' },
  '--tls-key': { env: 'PAYPOLICY_TLS_KEY', key: 'tlsKey' },
  '--signer-threads': { env: 'PAYPOLICY_SIGNER_THREADS', key: 'signerThreads' },
  '--tempo-rpc-url': { env: 'PAYPOLICY_TEMPO_RPC_URL', key: 'tempoRpcUrl' },
  '--max-connections': { env: 'PAYPOLICY_MAX_CONNECTIONS', key: 'maxConnections' },
  '--idle-timeout-ms': { env: 'PAYPOLICY_IDLE_TIMEOUT_MS', key: 'idleTimeoutMs' },
  '--request-timeout-ms': { env: 'PAYPOLICY_REQUEST_TIMEOUT_MS', key: 'requestTimeoutMs' },
  '--max-in-flight': { env: 'PAYPOLICY_MAX_IN_FLIGHT', key: 'maxInFlight' },
  '--max-in-flight-per-org': { env: 'PAYPOLICY_MAX_IN_FLIGHT_PER_ORG', key: 'maxInFlightPerOrg' },
  '--max-sign-queue': { env: 'PAYPOLICY_MAX_SIGN_QUEUE', key: 'maxSignQueue' },
  '--max-sign-queue-per-org': { env: 'PAYPOLICY_MAX_SIGN_QUEUE_PER_ORG', key: 'maxSignQueuePerOrg' },
  '--max-queue-ms': { env: 'PAYPOLICY_MAX_QUEUE_MS', key: 'maxQueueMs' },
  '--max-probes': { env: 'PAYPOLICY_MAX_PROBES', key: 'maxProbes' },
  '--max-probes-per-org': { env: 'PAYPOLICY_MAX_PROBES_PER_ORG', key: 'maxProbesPerOrg' },
  '--metrics-token': { env: 'PAYPOLICY_METRICS_TOKEN', key: 'metricsToken' },
  '--confirmations': { env: 'PAYPOLICY_CONFIRMATIONS', key: 'confirmations' },
  '--replace-after-ms': { env: 'PAYPOLICY_REPLACE_AFTER_MS', key: 'replaceAfterMs' },
  '--database-url': { env: 'PAYPOLICY_DATABASE_URL', key: 'databaseUrl' },
  '--database-pool-size': { env: 'PAYPOLICY_DATABASE_POOL_SIZE', key: 'databasePoolSize' },
  '--database-statement-timeout-ms': { env: 'PAYPOLICY_DATABASE_STATEMENT_TIMEOUT_MS', key: 'databaseStatementTimeoutMs' },
  '--stale-signing-ms': { env: 'PAYPOLICY_STALE_SIGNING_MS', key: 'staleSigningMs' },
  '--wal-restart-mb': { env: 'PAYPOLICY_WAL_RESTART_MB', key: 'walRestartMb' },
};

/** `serve` flags: a repeated value flag keeps its last value (kind `list`, read with `get`), as it always has. */
export const SERVE_FLAGS: FlagSpecs = { ...Object.fromEntries(Object.keys(FLAGS).map((flag) => [flag, 'list' as const])), '--dev': 'switch', '--skip-integrity-check': 'switch', '--metrics-agent-labels': 'switch', '--rpc-url': 'list' };

/** Parses `serve` flags over environment variables over defaults. Flags win over the environment. */
export function loadConfig(argv: string[], env: Env): Config {
  let flags: Flags;
  try {
    flags = parseFlags(argv, SERVE_FLAGS);
  } catch (err) {
    throw err instanceof UsageError ? new ConfigError(err.message) : err;
  }
  const raw: Partial<Record<keyof Config, string>> = {};
  for (const [flag, { env: name, key }] of Object.entries(FLAGS)) raw[key] = flags.get(flag) ?? (env[name] || undefined);
  const dev = flags.has('--dev') || env.PAYPOLICY_DEV === '1' || env.PAYPOLICY_DEV === 'true';
  const skipIntegrityCheck = flags.has('--skip-integrity-check') || env.PAYPOLICY_SKIP_INTEGRITY_CHECK === '1' || env.PAYPOLICY_SKIP_INTEGRITY_CHECK === 'true';
  const portText = raw.port ?? '8080';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) throw new ConfigError(`--port must be an integer from 0 to 65535, got "${portText}"`);
  const logLevel = (raw.logLevel ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
  if ((raw.tlsCert === undefined) !== (raw.tlsKey === undefined)) throw new ConfigError('--tls-cert and --tls-key must be given together');
  const threadsText = raw.signerThreads ?? String(Math.min(4, Math.max(1, availableParallelism() - 1)));
  const signerThreads = Number(threadsText);
  if (!/^\d+$/.test(threadsText) || signerThreads < 1 || signerThreads > 64) throw new ConfigError(`--signer-threads must be an integer from 1 to 64, got "${threadsText}"`);
  const probeAllowHosts = (env.PAYPOLICY_PROBE_ALLOW_HOSTS ?? '').split(',').map((h) => h.trim()).filter((h) => h !== '');
  for (const h of probeAllowHosts) {
    if (!/^[^\s:/]+:\d{1,5}$/.test(h) && !/^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(h)) throw new ConfigError(`PAYPOLICY_PROBE_ALLOW_HOSTS entries must be host:port, got "${h}"`);
  }
  const tempoRpcUrl = raw.tempoRpcUrl;
  if (tempoRpcUrl !== undefined && !/^https?:\/\/[^\s]+$/.test(tempoRpcUrl)) throw new ConfigError(`--tempo-rpc-url must be an http(s) URL, got "${tempoRpcUrl}"`);
  const rpcUrls = parseRpcUrls(env.PAYPOLICY_RPC_URLS, flags.all('--rpc-url'));
  const metricsToken = raw.metricsToken;
  const tokenProblem = metricsToken === undefined ? undefined : validateAdminToken(metricsToken);
  if (tokenProblem) throw new ConfigError(`--metrics-token ${tokenProblem}`);
  const metricsAgentLabels = flags.has('--metrics-agent-labels') || env.PAYPOLICY_METRICS_AGENT_LABELS === '1' || env.PAYPOLICY_METRICS_AGENT_LABELS === 'true';
  const databaseUrl = raw.databaseUrl;
  // Never echo the URL: it may hold a password.
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\/\S+$/.test(databaseUrl)) throw new ConfigError('--database-url must be a postgres:// URL');
  const staleSigningMs = optionalInteger(raw.staleSigningMs, '--stale-signing-ms', 1_000, 86_400_000);
  const maxQueueMs = optionalInteger(raw.maxQueueMs, '--max-queue-ms', 1, 600_000);
  // A payment may wait up to --max-queue-ms to be signed: a repair threshold below that would let
  // another replica fail rows a live one is still signing (500s, and work thrown away).
  if (staleSigningMs !== undefined && staleSigningMs < (maxQueueMs ?? DEFAULT_MAX_QUEUE_MS)) {
    throw new ConfigError(`--stale-signing-ms (${staleSigningMs}) must be at least --max-queue-ms (${maxQueueMs ?? DEFAULT_MAX_QUEUE_MS}): a live replica's payment may wait that long to be signed`);
  }
  return {
    databaseUrl,
    databasePoolSize: optionalInteger(raw.databasePoolSize, '--database-pool-size', 2, 1_000),
    databaseStatementTimeoutMs: optionalInteger(raw.databaseStatementTimeoutMs, '--database-statement-timeout-ms', 100, 600_000),
    staleSigningMs,
    walRestartMb: optionalInteger(raw.walRestartMb, '--wal-restart-mb', 1, 1_024),
    metricsToken,
    metricsAgentLabels,
    maxConnections: optionalInteger(raw.maxConnections, '--max-connections', 1, 1_000_000),
    idleTimeoutMs: optionalInteger(raw.idleTimeoutMs, '--idle-timeout-ms', 100, 3_600_000),
    requestTimeoutMs: optionalInteger(raw.requestTimeoutMs, '--request-timeout-ms', 100, 600_000),
    maxInFlight: optionalInteger(raw.maxInFlight, '--max-in-flight', 1, 1_000_000),
    maxInFlightPerOrg: optionalInteger(raw.maxInFlightPerOrg, '--max-in-flight-per-org', 1, 1_000_000),
    maxSignQueue: optionalInteger(raw.maxSignQueue, '--max-sign-queue', 1, 1_000_000),
    maxSignQueuePerOrg: optionalInteger(raw.maxSignQueuePerOrg, '--max-sign-queue-per-org', 1, 1_000_000),
    maxQueueMs,
    maxProbes: optionalInteger(raw.maxProbes, '--max-probes', 1, 100_000),
    maxProbesPerOrg: optionalInteger(raw.maxProbesPerOrg, '--max-probes-per-org', 1, 100_000),
    confirmations: optionalInteger(raw.confirmations, '--confirmations', 1, 1_000),
    replaceAfterMs: optionalInteger(raw.replaceAfterMs, '--replace-after-ms', 1_000, 86_400_000),
    tempoRpcUrl,
    rpcUrls,
    skipIntegrityCheck,
    dev,
    probeAllowHosts,
    signerThreads,
    port,
    host: raw.host ?? '127.0.0.1',
    dataDir: resolve(raw.dataDir ?? './data'),
    logLevel,
    adminToken: env.PAYPOLICY_ADMIN_TOKEN || undefined,
    masterKey: env.PAYPOLICY_MASTER_KEY || undefined,
    tlsCert: raw.tlsCert,
    tlsKey: raw.tlsKey,
  };
}

/**
 * The RPC endpoints per chain: `PAYPOLICY_RPC_URLS` (`8453=https://…,84532=https://…`), then each
 * `--rpc-url CHAIN_ID=URL`, which replaces the environment's entry for its chain. A chain named
 * twice in one source is an error, so is anything but a positive integer id and an http(s) URL.
 */
function parseRpcUrls(envText: string | undefined, flagValues: string[]): ReadonlyMap<number, string> {
  const urls = new Map<number, string>();
  const read = (entries: string[], source: string) => {
    const seen = new Set<number>();
    for (const entry of entries) {
      const m = /^\s*(\d{1,15})\s*=\s*(https?:\/\/[^\s,]+)\s*$/.exec(entry);
      const chainId = m ? Number(m[1]) : 0;
      if (!m || chainId < 1) throw new ConfigError(`${source} entries must be CHAIN_ID=http(s)://URL with a positive integer chain id, got "${entry.split('=')[0]!.slice(0, 20)}=…"`);
      if (seen.has(chainId)) throw new ConfigError(`${source} names chain ${chainId} more than once`);
      seen.add(chainId);
      urls.set(chainId, m[2]!);
    }
  };
  if (envText) read(envText.split(',').filter((e) => e.trim() !== ''), 'PAYPOLICY_RPC_URLS');
  read(flagValues, '--rpc-url');
  return urls;
}

/** An integer flag within [min, max], or undefined when it was not given. */
function optionalInteger(text: string | undefined, flag: string, min: number, max: number): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) throw new ConfigError(`${flag} must be an integer from ${min} to ${max}, got "${text}"`);
  return n;
}
