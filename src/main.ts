import { runAdminCommand, ADMIN_USAGE } from './cli/admin.js';
import { ConfigError, loadConfig } from './config.js';

const USAGE = `usage: paypolicy <command> [options]

  serve [--port N] [--host H] [--data-dir DIR] [--log-level L] [--tls-cert F --tls-key F]
        [--signer-threads N] [--dev] [--tempo-rpc-url URL] [--max-connections N]
        [--idle-timeout-ms MS] [--request-timeout-ms MS] [--max-in-flight N]
        [--max-sign-queue N] [--max-probes N] [--skip-integrity-check]
      Start the service (default port 8080, host 127.0.0.1, data dir ./data). Each flag has a
      PAYPOLICY_* environment variable (README, Configuration); a flag wins over its variable.

${ADMIN_USAGE}`;

/** After a failed sync: how long every request (and /readyz) answers 503 before the process exits 1. */
const FAIL_STOP_EXIT_MS = 1000;

/** `paypolicy serve`: start, print the first-start banner once, stop cleanly on a signal. */
async function serve(argv: string[]): Promise<number> {
  // Loaded here, not at the top: admin commands never need the server and start faster without it.
  const { startPaypolicy } = await import('./paypolicy.js');
  const { bootstrapBanner } = await import('./bootstrap.js');
  // Handlers go in before start-up, so a signal that arrives while starting still stops cleanly.
  let signalled: string | undefined;
  let onSignal: (signal: string) => void = (signal) => (signalled = signal);
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once('SIGINT', () => onSignal('SIGINT'));
  let app: Awaited<ReturnType<typeof startPaypolicy>> | undefined;
  try {
    app = await startPaypolicy(loadConfig(argv, process.env), {
      // Fail-stop: answer 503 (and /readyz 503) for a moment so balancers take us out, then exit
      // non-zero without closing the database, so a supervisor restarts on what is on disk.
      onStorageFailure: () => {
        setTimeout(() => {
          app?.log.flush(() => process.exit(1));
          setTimeout(() => process.exit(1), 200);
        }, FAIL_STOP_EXIT_MS);
      },
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (err instanceof ConfigError) process.stderr.write(`paypolicy: invalid configuration: ${e.message}\n`);
    else if (e.code === 'EADDRINUSE') process.stderr.write(`paypolicy: cannot listen: address already in use (${e.message})\n`);
    else process.stderr.write(`paypolicy: cannot start: ${e.message}\n`);
    return 2;
  }
  const running = app;
  if (running.bootstrap) process.stdout.write(`${bootstrapBanner(running.bootstrap, running.url, running.deps.store.db.name.replace(/\/paypolicy\.db$/, ''))}\n`);
  else process.stdout.write(`paypolicy listening on ${running.url} (admin token and test key: see bootstrap.json in the data directory)\n`);
  await new Promise<void>((resolve) => {
    onSignal = (signal) => {
      running.log.info({ signal }, 'shutting down');
      void running.stop().then(resolve);
    };
    if (signalled) onSignal(signalled);
  });
  return 0;
}

/** Entry point of the `paypolicy` command. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'serve') return serve(rest);
  if (command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  return runAdminCommand(command, rest);
}
