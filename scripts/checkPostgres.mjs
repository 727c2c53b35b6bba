// Before the tests (npm test's pretest, and CI): the PostgreSQL tests must run, never skip.
// Checks that the server the tests use (PAYPOLICY_TEST_PG_URL, default
// postgres://root@127.0.0.1:5432/test) answers; if it does not, tries once to start an installed
// Debian cluster, then fails with what the tests need (README, Test prerequisites).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import pg from 'pg';

const url = process.env.PAYPOLICY_TEST_PG_URL ?? 'postgres://root@127.0.0.1:5432/test';

async function answers() {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    const { rows } = await client.query('SHOW server_version');
    return rows[0].server_version;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => {});
  }
}

let version = await answers();
if (!version) {
  try {
    for (const v of existsSync('/etc/postgresql') ? readdirSync('/etc/postgresql') : []) execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', v, 'main', 'start'], { stdio: 'inherit' });
  } catch (err) {
    process.stderr.write(`could not start PostgreSQL: ${err.message}\n`);
  }
  for (let i = 0; i < 20 && !version; i++) {
    await new Promise((r) => setTimeout(r, 500));
    version = await answers();
  }
}
if (!version) {
  process.stderr.write(`\nPostgreSQL does not answer at ${url.replace(/\/\/[^@]*@/, '//')}: the PostgreSQL tests cannot run, and they are never skipped.\n` +
    'They need PostgreSQL 13 or later on 127.0.0.1:5432 where the role in PAYPOLICY_TEST_PG_URL (default root, no password) may\n' +
    'create databases; set PAYPOLICY_TEST_PG_URL to use another server. See README.md, Test prerequisites.\n');
  process.exit(1);
}
process.stdout.write(`PostgreSQL ${version} answers\n`);
