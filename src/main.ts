import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, relative } from 'node:path';
import { runAdminCommand, ADMIN_USAGE } from './cli/admin.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { limitHeapGrowth } from './server/heapGrowth.js';
import { isSingleExecutable } from './singleExecutable/runtime.js';

const SERVE_LINE = `serve [--port N] [--host H] [--data-dir DIR] [--log-level L] [--tls-cert F --tls-key F]
        [--signer-threads N] [--dev] [--tempo-rpc-url URL] [--rpc-url CHAIN_ID=URL]… [--confirmations N]
        [--replace-after-ms MS] [--max-connections N]
        [--idle-timeout-ms MS] [--request-timeout-ms MS] [--max-in-flight N] [--max-in-flight-per-org N]
        [--max-sign-queue N] [--max-sign-queue-per-org N] [--max-queue-ms MS] [--max-probes N]
        [--max-probes-per-org N] [--skip-integrity-check]
        [--metrics-token T] [--metrics-agent-labels] [--database-url postgres://…]
        [--database-pool-size N] [--database-statement-timeout-ms MS] [--stale-signing-ms MS]
        [--wal-restart-mb N]
      Start the service (default port 8080, host 127.0.0.1, data dir ./data). Each flag has a
      PAYPOLICY_* environment variable (docs/configuration.md); a flag wins over its variable.`;

const OWN_COMMANDS = `  ${SERVE_LINE}
  migrate-store --from DATA_DIR --to postgres://…
      Copy a stopped SQLite deployment into an empty PostgreSQL database, verified, in one transaction.
  version [--json]
      Print the version, and whether this is the single executable.
  help [COMMAND]
      Print this text, or the usage of one command (also: paypolicy COMMAND --help).`;

const USAGE = `usage: paypolicy <command> [options]

${OWN_COMMANDS}

${ADMIN_USAGE}`;

const SERVE_USAGE = `usage: paypolicy serve [options]

  Start the service. Each option has an environment variable; an option wins over its variable.
  Invalid configuration stops start-up with one line on stderr (exit 2).

  --port N                   PAYPOLICY_PORT              listening port (default 8080; 0 picks a free one)
  --host H                   PAYPOLICY_HOST              listening address (default 127.0.0.1)
  --data-dir DIR             PAYPOLICY_DATA_DIR          data directory, one server at a time (default ./data)
  --log-level L              PAYPOLICY_LOG_LEVEL         fatal|error|warn|info|debug|trace|silent (default info)
  --tls-cert F               PAYPOLICY_TLS_CERT          PEM certificate; with --tls-key, serve TLS
  --tls-key F                PAYPOLICY_TLS_KEY           PEM private key of --tls-cert
  --signer-threads N         PAYPOLICY_SIGNER_THREADS    signing threads (default cores - 1, 1 to 4)
  --dev                      PAYPOLICY_DEV=1             quote and sign may probe http:// URLs
  --tempo-rpc-url URL        PAYPOLICY_TEMPO_RPC_URL     Tempo JSON-RPC node for MPP fee estimates
  --rpc-url CHAIN_ID=URL     PAYPOLICY_RPC_URLS          EVM node per chain, repeatable (8453=https://…,84532=…): raw transactions are broadcast
  --confirmations N          PAYPOLICY_CONFIRMATIONS     blocks before a submitted transaction is confirmed (default 1)
  --replace-after-ms MS      PAYPOLICY_REPLACE_AFTER_MS  fee-bump a submitted transaction not mined after this (default 60000)
  --max-connections N        PAYPOLICY_MAX_CONNECTIONS   open client connections (default 4096 or the file limit - 256)
  --idle-timeout-ms MS       PAYPOLICY_IDLE_TIMEOUT_MS   idle HTTP/2 session lifetime (default 60000)
  --request-timeout-ms MS    PAYPOLICY_REQUEST_TIMEOUT_MS  headers and body must arrive within this (default 30000)
  --max-in-flight N          PAYPOLICY_MAX_IN_FLIGHT     agent requests at once; more get 503 (default 128)
  --max-in-flight-per-org N  PAYPOLICY_MAX_IN_FLIGHT_PER_ORG  of those, one organization's at most (default 3/4)
  --max-sign-queue N         PAYPOLICY_MAX_SIGN_QUEUE    payments in the signing stage at once (default 256)
  --max-sign-queue-per-org N  PAYPOLICY_MAX_SIGN_QUEUE_PER_ORG  of those, one organization's at most (default 3/4)
  --max-queue-ms MS          PAYPOLICY_MAX_QUEUE_MS      a payment waiting longer to be signed gets 503 (default 1000)
  --max-probes N             PAYPOLICY_MAX_PROBES        outbound paywall probes at once (default 32)
  --max-probes-per-org N     PAYPOLICY_MAX_PROBES_PER_ORG  of those, one organization's at most (default 3/4)
  --skip-integrity-check     PAYPOLICY_SKIP_INTEGRITY_CHECK=1  skip PRAGMA quick_check at start
  --metrics-token T          PAYPOLICY_METRICS_TOKEN     bearer token for /metrics (default: loopback clients only)
  --metrics-agent-labels     PAYPOLICY_METRICS_AGENT_LABELS=1  also count sign outcomes per agent id
  --database-url URL         PAYPOLICY_DATABASE_URL      postgres://… : PostgreSQL shared by replicas (default: SQLite in the data dir)
  --database-pool-size N     PAYPOLICY_DATABASE_POOL_SIZE  PostgreSQL connections of this process (default 10)
  --database-statement-timeout-ms MS  PAYPOLICY_DATABASE_STATEMENT_TIMEOUT_MS  per statement (default 5000)
  --stale-signing-ms MS      PAYPOLICY_STALE_SIGNING_MS  PostgreSQL: a payment left signing this long by a stopped replica is failed (default 60000)
  --wal-restart-mb N         PAYPOLICY_WAL_RESTART_MB    SQLite: WAL size at which writes pause a moment so it starts over (default 32)
  --help                     print this text

  Environment only: PAYPOLICY_ADMIN_TOKEN (admin token, 24+ characters; default: generated on the
  first start), PAYPOLICY_MASTER_KEY (key of the treasury keys; default <data dir>/master.key),
  PAYPOLICY_NATIVE_DIR (single executable: where its native addons are unpacked; default $TMPDIR).`;

const isHelp = (arg: string | undefined) => arg === '--help' || arg === '-h';

/** Defined by the single executable's bundle (scripts/build-binary.mjs). */
declare const __PAYPOLICY_VERSION__: string | undefined;

/** The package version: built into the executable, else read from the checkout's package.json. */
function packageVersion(): string {
  if (typeof __PAYPOLICY_VERSION__ !== 'undefined') return __PAYPOLICY_VERSION__;
  for (const up of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'paypolicy' && pkg.version) return pkg.version;
    } catch {
      // Not this folder: dist/src/ and src/ sit at different depths.
    }
  }
  return 'unknown';
}

/** `paypolicy version [--json]`. */
function version(argv: string[]): number {
  if (argv.some(isHelp)) {
    process.stdout.write('usage: paypolicy version [--json]\n\n  Print the version, and whether this is the single executable.\n');
    return 0;
  }
  const unknown = argv.find((a) => a !== '--json');
  if (unknown !== undefined) {
    process.stderr.write(`paypolicy: version takes only --json (got ${JSON.stringify(unknown.slice(0, 40))})\n`);
    return 2;
  }
  const info = { version: packageVersion(), node: process.version, singleExecutable: isSingleExecutable() };
  process.stdout.write(argv.includes('--json') ? `${JSON.stringify(info)}\n` : `paypolicy ${info.version} (node ${info.node}${info.singleExecutable ? ', single executable' : ''})\n`);
  return 0;
}

/** `paypolicy help [COMMAND [ACTION]]`: the same text as `paypolicy COMMAND [ACTION] --help`. */
function help(argv: string[]): Promise<number> | number {
  const [command, action] = argv;
  if (command === undefined || isHelp(command)) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (command === 'serve' || command === 'version' || command === 'help' || command === 'migrate-store') return main([command, '--help']);
  return runAdminCommand(command, action === undefined ? ['--help'] : [action, '--help']);
}

/** The signals that stop a running server cleanly; a second one of them ends it at once. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'] as const;

/** After a failed sync: how long every request (and /readyz) answers 503 before the process exits 1. */
const FAIL_STOP_EXIT_MS = 1000;

/** `paypolicy serve`: start, print the first-start banner once, stop cleanly on a signal. */
async function serve(argv: string[]): Promise<number> {
  // Before anything is loaded: the server's heaps follow its live objects (server/heapGrowth.ts).
  limitHeapGrowth();
  // Loaded here, not at the top: admin commands never need the server and start faster without it.
  const { startPaypolicy } = await import('./paypolicy.js');
  const { adminTokenNotice, bootstrapBanner } = await import('./bootstrap.js');
  // Handlers go in before start-up, so a signal that arrives while starting still stops cleanly.
  let signalled: string | undefined;
  let onSignal: (signal: string) => void = (signal) => (signalled = signal);
  // SIGHUP (a closed terminal) and SIGQUIT too: left to Node's default they end the process
  // without the exit hooks, losing the log lines still buffered (up to ~200 ms of them).
  // The first one takes every handler away, so a second one of any of them ends the process at
  // once (Node's default): with one handler per signal, SIGINT after SIGTERM was taken as the
  // first SIGINT and waited out the whole drain.
  for (const signal of STOP_SIGNALS) {
    process.once(signal, () => {
      for (const s of STOP_SIGNALS) process.removeAllListeners(s);
      onSignal(signal);
    });
  }
  let app: Awaited<ReturnType<typeof startPaypolicy>> | undefined;
  let config: Config | undefined;
  try {
    config = loadConfig(argv, process.env);
    app = await startPaypolicy(config, {
      // Fail-stop: answer 503 (and /readyz 503) for a moment so balancers take us out, then exit
      // non-zero without closing the database, so a supervisor restarts on what is on disk.
      onStorageFailure: () => {
        setTimeout(() => {
          // The signing threads stop between jobs first: an exit terminates them, and one
          // terminated inside the signing addon aborts the process (signing/signerPool.ts stop).
          const signersStopped = app ? Promise.race([app.deps.signer.close(), new Promise((r) => setTimeout(r, 200))]) : Promise.resolve();
          void signersStopped.then(() => {
            app?.log.flush(() => process.exit(1));
            setTimeout(() => process.exit(1), 200);
          });
        }, FAIL_STOP_EXIT_MS);
      },
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (err instanceof ConfigError) process.stderr.write(`paypolicy: invalid configuration: ${e.message}\n`);
    else if (e.code === 'EADDRINUSE') {
      process.stderr.write(`paypolicy: cannot listen: address already in use (${e.message}); choose another with --port N (or PAYPOLICY_PORT)` +
        `${existsSync(join(config?.dataDir ?? '', 'bootstrap.json')) ? '; the first-start details are printed once a start can listen' : ''}\n`);
    }
    else process.stderr.write(`paypolicy: cannot start: ${e.message}\n`);
    return 2;
  }
  const running = app;
  const cli = isSingleExecutable() ? process.execPath : launcherPath();
  // The banner is best effort: a stdout that fails (a full disk, a reader gone) raised an
  // unhandled 'error' here and stopped a server that had just started. Log lines handle their
  // own write failures (observability/logger.ts).
  serving = true;
  if (running.bootstrap) {
    process.stdout.write(`${bootstrapBanner(running.bootstrap, running.url, config.dataDir, cli)}\n`);
  }
  else process.stdout.write(`paypolicy listening on ${running.url} (${await adminTokenNotice(running.deps, config.adminToken)})\n`);
  await new Promise<void>((resolve) => {
    onSignal = (signal) => {
      running.log.info({ signal }, 'shutting down');
      void running.stop().then(resolve);
    };
    if (signalled) onSignal(signalled);
  });
  return 0;
}

/** Set once `serve` is up: from then on stdout carries only the banner and the logs. */
let serving = false;

/**
 * A stdout that fails is reported once, not thrown: unhandled, its 'error' printed a stack trace
 * (`paypolicy org list | head -1`) or stopped a server at start (a full disk). A command's output
 * that could not be written makes it exit 1 (quietly when the reader simply went away: EPIPE, as
 * `head` expects); a running server carries on.
 */
/**
 * How the banner tells the operator to run the CLI: the launcher this process was started from,
 * relative to where they are when it is below, else absolute. Never a bare package name, which a
 * package runner would look up in a public registry.
 */
function launcherPath(): string {
  const script = process.argv[1] ?? 'bin/paypolicy.js';
  const rel = relative(process.cwd(), script);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) ? `./${rel}` : script;
}

function onStdoutError(err: NodeJS.ErrnoException): void {
  if (serving) return;
  if (err.code !== 'EPIPE') process.stderr.write(`paypolicy: cannot write to stdout: ${err.code ?? err.message}\n`);
  process.exitCode = 1;
}

/**
 * A stderr that fails has nowhere left to report to. Unhandled, its 'error' was thrown: a command
 * exited 1 with whatever status it had chosen lost, and a server whose start-up failure could not
 * be printed crashed instead of exiting 2. The status stays the command's own.
 */
function onStderrError(): void {}

/** Entry point of the `paypolicy` command. */
export async function main(argv: string[]): Promise<number> {
  if (!process.stdout.listeners('error').includes(onStdoutError)) process.stdout.on('error', onStdoutError);
  if (!process.stderr.listeners('error').includes(onStderrError)) process.stderr.on('error', onStderrError);
  const [command, ...rest] = argv;
  if (command === undefined) {
    // Not `serve`: a second server started by a bare `paypolicy` is a surprise, not a default.
    process.stderr.write(`paypolicy: no command given; \`paypolicy serve\` starts the server\n\n${USAGE}\n`);
    return 2;
  }
  if (command === 'serve') {
    if (rest.some(isHelp)) {
      process.stdout.write(`${SERVE_USAGE}\n`);
      return 0;
    }
    return serve(rest);
  }
  if (command === 'version' || command === '--version') return version(rest);
  if (command === 'help' || isHelp(command)) return help(rest);
  if (command === 'migrate-store') return (await import('./cli/migrateStoreCommand.js')).migrateStoreCommand(rest);
  return runAdminCommand(command, rest);
}
