import { resolve } from 'node:path';

export const MIGRATE_STORE_USAGE = `usage: paypolicy migrate-store --from DATA_DIR --to postgres://…

  Copy a SQLite deployment (DATA_DIR/paypolicy.db) into an empty PostgreSQL database, in one
  transaction: every table, rows as they are (ledger, approvals, API keys, encrypted treasury keys,
  dashboard users and sessions, settings). The server on DATA_DIR must be stopped (its lock is
  taken). The target's schema is created if missing; a target with any row is refused. Before
  COMMIT, every table's row count, the sum of each integer column and a digest of its rows are
  compared with the source; any difference rolls the whole copy back.

  --from DIR                 the SQLite data directory
  --to URL                   PAYPOLICY_DATABASE_URL   the PostgreSQL database (postgres://user@host:port/db)
  --help                     print this text

  The master key is not copied: give every replica the same key (DATA_DIR/master.key copied into
  each replica's data directory, or PAYPOLICY_MASTER_KEY).`;

/** `paypolicy migrate-store`: exit 0 with a per-table report, 2 on bad usage, 1 when refused or failed. */
export async function migrateStoreCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${MIGRATE_STORE_USAGE}\n`);
    return 0;
  }
  let from: string | undefined;
  let to: string | undefined = env.PAYPOLICY_DATABASE_URL || undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = inline ?? argv[++i];
    if (flag !== '--from' && flag !== '--to') {
      process.stderr.write(`paypolicy: migrate-store: unknown option ${JSON.stringify(arg.slice(0, 40))} (see paypolicy migrate-store --help)\n`);
      return 2;
    }
    if (value === undefined || value === '') {
      process.stderr.write(`paypolicy: migrate-store: ${flag} needs a value\n`);
      return 2;
    }
    if (flag === '--from') from = value;
    else to = value;
  }
  if (!from || !to) {
    process.stderr.write('paypolicy: migrate-store needs --from DATA_DIR and --to postgres://… (see paypolicy migrate-store --help)\n');
    return 2;
  }
  if (!/^postgres(ql)?:\/\//.test(to)) {
    process.stderr.write('paypolicy: migrate-store: --to must be a postgres:// URL\n');
    return 2;
  }
  const { migrateStore } = await import('../store/pg/migrateStore.js');
  try {
    const report = await migrateStore({ fromDir: resolve(from), toUrl: to, log: (line) => process.stdout.write(`${line}\n`) });
    process.stdout.write(`copied and verified, schema version ${report.schemaVersion}:\n`);
    for (const t of report.tables) {
      const sums = Object.entries(t.sums).filter(([, v]) => v !== '0').map(([k, v]) => `${k}=${v}`).join(' ');
      process.stdout.write(`  ${t.table.padEnd(26)} ${String(t.rows).padStart(9)} rows  sha256 ${t.sha256.slice(0, 16)}  ${sums}\n`);
    }
    process.stdout.write('Give every replica the same master key (this data directory\'s master.key, or PAYPOLICY_MASTER_KEY), then start them with --database-url.\n');
    return 0;
  } catch (err) {
    // The URL may hold a password: only the error's own message is printed, never `to`.
    process.stderr.write(`paypolicy: migrate-store failed, nothing was written: ${(err as Error).message}\n`);
    return 1;
  }
}
